import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ConnectionApi } from "../src/runtime/extension.js";
import {
  ConnectionState,
  ConnectionStates,
  SessionStore,
  type SavedConnectionState,
} from "../src/extensions/state.js";
import { MemoryTables, type StateTable } from "../src/store/tables.js";

/** A connection state whose writes are recorded. */
function recorded(): { state: ConnectionState; writes: SavedConnectionState[] } {
  const writes: SavedConnectionState[] = [];
  return { state: new ConnectionState((saved) => writes.push(structuredClone(saved))), writes };
}

const models = { currentModelId: "a", availableModels: [{ modelId: "a" }, { modelId: "b" }] };
const modes = { currentModeId: "ask", availableModes: [{ id: "ask" }, { id: "code" }] };
const configOptions = [{ id: "model", category: "model", type: "select", currentValue: "a", options: [] }];

describe("connection state persistence: a row is written once per change, never for a mutation that changes nothing", () => {
  it("adopting a session writes once; adopting it again with the same answer writes nothing", () => {
    const { state, writes } = recorded();
    state.adopt("s1", { sessionId: "s1", models, modes, configOptions });
    assert.equal(writes.length, 1);
    assert.deepEqual(writes[0], { seen: ["s1"], muted: [], agent: { s1: { models, modes, configOptions } } });
    state.adopt("s1", structuredClone({ sessionId: "s1", models, modes, configOptions }));
    state.adopt("s1", undefined);
    assert.equal(writes.length, 1, "an unchanged re-adopt wrote");
    state.adopt("s2", "not an object");
    assert.equal(writes.length, 2, "a new session alone is a change");
  });

  it("mute, unmute and discard write only when membership changes", () => {
    const { state, writes } = recorded();
    state.unmute("s1");
    state.discard("s1");
    assert.equal(writes.length, 0);
    state.mute("s1");
    state.mute("s1");
    assert.equal(writes.length, 1);
    assert.deepEqual(writes[0]!.muted, ["s1"]);
    state.unmute("s1");
    state.unmute("s1");
    assert.equal(writes.length, 2);
    assert.deepEqual(writes[1]!.muted, []);
    state.adopt("s1", {});
    state.discard("s1");
    state.discard("s1");
    assert.equal(writes.length, 4);
    assert.deepEqual(writes[3]!.seen, []);
  });

  it("session updates: streamed content and repeated config never write; a real switch writes once", () => {
    const { state, writes } = recorded();
    state.adopt("s1", { modes, configOptions });
    assert.equal(writes.length, 1);
    for (let i = 0; i < 100; i++)
      state.absorbUpdate("s1", {
        sessionUpdate: "agent_message_chunk",
        content: { type: "text", text: "x" },
      });
    state.absorbUpdate("s1", {
      sessionUpdate: "config_option_update",
      configOptions: structuredClone(configOptions),
    });
    state.absorbUpdate("s1", { sessionUpdate: "current_mode_update", currentModeId: "ask" });
    // A mode update for a session with no known modes changes (and creates) nothing worth writing.
    state.absorbUpdate("s2", { sessionUpdate: "current_mode_update", currentModeId: "ask" });
    assert.equal(writes.length, 1, "an update that changed nothing wrote");
    state.absorbUpdate("s1", { sessionUpdate: "current_mode_update", currentModeId: "code" });
    assert.equal(writes.length, 2);
    assert.equal(state.reported("s1")?.modes?.currentModeId, "code");
  });

  it("switches answered together are written once; none, or ones that change nothing, write nothing", () => {
    const { state, writes } = recorded();
    state.adopt("s1", { models, modes });
    const view = state.agentState("s1");
    state.absorbSwitches("s1", []);
    state.absorbSwitches("s1", [{ method: "session/set_mode", params: { modeId: "ask" }, result: {} }]);
    assert.equal(writes.length, 1);
    state.absorbSwitches("s1", [
      { method: "session/set_mode", params: { modeId: "code" }, result: {} },
      { method: "session/set_model", params: { modelId: "b" }, result: {} },
    ]);
    assert.equal(writes.length, 2);
    assert.deepEqual(writes[1]!.agent.s1, {
      configOptions: undefined,
      models: { ...models, currentModelId: "b" },
      modes: { ...modes, currentModeId: "code" },
    });
    assert.equal(view.modes?.currentModeId, "code", "the agentState view does not follow the session");
    state.absorb("s1", { models: { ...models, currentModelId: "b" } });
    assert.equal(writes.length, 2, "absorbing the state already held wrote");
  });

  it("a connection's state is restored from its row without writing it again, and changes write the row", () => {
    const table = new MemoryTables().table<SavedConnectionState>("connectionState");
    const sets: string[] = [];
    const counting: StateTable<SavedConnectionState> = {
      ...table,
      set: (key, value) => {
        sets.push(key);
        table.set(key, value);
      },
      entries: () => table.entries(),
      get size() {
        return table.size;
      },
    };
    table.set("c1", {
      seen: ["old"],
      muted: ["old"],
      agent: { old: { configOptions: undefined, models, modes: undefined } },
    });
    const conn = { id: "c1", sessionIds: new Set(["live"]) } as unknown as ConnectionApi;
    const state = new ConnectionStates(counting).of(conn);
    assert.deepEqual([...state.seen].sort(), ["live", "old"]);
    assert.ok(state.muted.has("old"));
    assert.equal(state.reported("old")?.models, models);
    assert.deepEqual(sets, [], "restoring wrote");
    state.unmute("old");
    assert.deepEqual(sets, ["c1"]);
    assert.deepEqual(table.get("c1")?.muted, []);
  });
});

describe("session store: the record of the last touched session", () => {
  it("touch returns each session's own record when sessions alternate, whatever string names them", () => {
    const store = new SessionStore();
    // Equal ids as distinct strings, as the text-chunk recogniser hands out a new one per run.
    const id = (s: string) => ` ${s}`.slice(1);
    const s1 = store.touch("mock", id("s1"));
    const s2 = store.touch("mock", id("s2"));
    assert.notEqual(s1, s2);
    const ids = ["s1", "s1", "s2", "s1", "s2", "s2"].map(id);
    for (const sessionId of ids) store.touch("mock", sessionId).eventCount++;
    assert.equal(s1.eventCount, 3);
    assert.equal(s2.eventCount, 3);
    assert.equal(store.touch("other", id("s1")).agentId, "other");
    assert.equal(store.touch("mock", "s1"), s1);
  });
});
