import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, describe, test } from "node:test";
import { memorySessionStore, type SessionStore } from "@sandbox-agent/session-store";
import { tempDir, waitFor } from "@sandbox-agent/testkit";
import {
  SandboxAgentClient,
  followSession,
  type MirroredEvent,
  type SandboxAgentClientOptions,
} from "../src/index.js";
import { TOKEN, messageTexts, record, useServer } from "./helpers.js";

// Sessions written to disk, so that an agent process of a new connection can reopen them.
const stateDir = tempDir("sdk-store-mock-state-");
after(() => rmSync(stateDir, { recursive: true, force: true }));
const fixture = useServer({ env: { MOCK_AGENT_STATE_DIR: stateDir } });

/** Everything the store's mirror delivers for `sessionId`, from the start, kept up to date. */
function follow(store: SessionStore, sessionId: string): { events: MirroredEvent[]; close(): void } {
  const events: MirroredEvent[] = [];
  const subscription = followSession(store, sessionId, (batch) => void events.push(...batch));
  return { events, close: () => subscription.close() };
}

const types = (events: MirroredEvent[]): string[] => events.map((e) => e.event.type);
const texts = (events: MirroredEvent[]): string[] => messageTexts(events.map((e) => e.event));
const chunks = (n: number): string[] => Array.from({ length: n }, (_, i) => `chunk ${i + 1} `);

function bound(
  store: SessionStore,
  sessionId: string,
  extra: Partial<SandboxAgentClientOptions> = {},
): SandboxAgentClient {
  return fixture.client({ store, sessionId, sandboxKey: "box-1", autoConnect: false, ...extra });
}

/** Takes the session over the way another replica would: address and agent from the store. */
function reattach(
  store: SessionStore,
  sessionId: string,
  extra: Partial<SandboxAgentClientOptions> = {},
): Promise<SandboxAgentClient> {
  return SandboxAgentClient.reattach({
    store,
    sessionId,
    baseUrl: fixture.server.baseUrl,
    token: TOKEN,
    requestTimeoutMs: 15_000,
    ...extra,
  });
}

describe("a client bound to a session of a store", { timeout: 60_000 }, () => {
  test("records its connection and agent session, and mirrors every event for followers", async () => {
    const store = memorySessionStore();
    const client = bound(store, "chat-record");
    await client.connect();
    const created = await store.sessions.get("chat-record");
    assert.equal(created?.sandboxKey, "box-1");
    assert.equal(created?.agent, "mock");
    assert.match(created?.connectionId ?? "", /\S/);
    assert.match(created?.lastEventId ?? "", /\.\d+$/, "the stream's priming id: a takeover misses nothing");

    const { sessionId } = await client.newSession({ cwd: "/tmp" });
    assert.equal(client.agentSessionId, sessionId);
    const recorded = await store.sessions.get("chat-record");
    assert.equal(recorded?.agentSessionId, sessionId);
    assert.deepEqual(recorded?.metadata, { "sandboxagent.dev": { cwd: "/tmp" } });

    const turn = client.prompt({ sessionId, prompt: "slow 20 10" });
    await waitFor(async () => ((await store.sessions.get("chat-record"))?.lastSeq ?? 0) >= 5, 10_000);
    // Joined mid-turn: the history, then the rest live.
    const follower = follow(store, "chat-record");
    assert.equal((await turn).stopReason, "end_turn");
    await waitFor(() => follower.events.at(-1)?.event.type === "turnEnded", 10_000, "the end of the turn");
    follower.close();
    assert.deepEqual(types(follower.events), ["turnStarted", ...chunks(20).map(() => "update"), "turnEnded"]);
    assert.deepEqual(texts(follower.events), chunks(20));
    assert.deepEqual(
      follower.events.map((e) => e.seq),
      follower.events.map((_, i) => i + 1),
    );
    assert.deepEqual((follower.events[0]!.event as { prompt: unknown }).prompt, [
      { type: "text", text: "slow 20 10" },
    ]);
    const last = (await store.sessions.get("chat-record"))!;
    assert.equal(last.lastEventId, follower.events.at(-1)!.eventId, "the resume point follows the mirror");

    await client.disconnect();
    assert.equal((await store.sessions.get("chat-record"))?.connectionId, null, "disconnect forgets it");
  });

  test("another client takes the connection over mid-turn: every event once, the earlier turn's end too", async () => {
    const store = memorySessionStore();
    const first = bound(store, "chat-handover");
    await first.connect();
    const { sessionId } = await first.newSession({ cwd: "/tmp" });
    void first.prompt({ sessionId, prompt: "slow 60 20" }).catch(() => undefined);
    const follower = follow(store, "chat-handover");
    await waitFor(() => texts(follower.events).length >= 10, 10_000, "the turn to be under way");
    await first.release();

    const second = await reattach(store, "chat-handover");
    const local = record(second);
    assert.equal(second.agentSessionId, sessionId);
    await waitFor(() => follower.events.at(-1)?.event.type === "turnEnded", 20_000, "the first turn to end");
    assert.deepEqual(texts(follower.events), chunks(60), "each chunk once, in order");
    assert.ok(
      local.some((e) => e.type === "turnEnded" && e.sessionId === sessionId),
      "the taken-over turn's end is reported to the new client's listeners too",
    );

    assert.equal(
      (await second.prompt({ sessionId, prompt: "echo from the second replica" })).stopReason,
      "end_turn",
    );
    await waitFor(() => follower.events.filter((e) => e.event.type === "turnEnded").length === 2, 10_000);
    follower.close();
    assert.deepEqual(types(follower.events).slice(-3), ["turnStarted", "update", "turnEnded"]);
    assert.equal(texts(follower.events).at(-1), "from the second replica");
    await second.disconnect();
  });

  test("an agent request the first client left unanswered is sent again to the one that takes over", async () => {
    const store = memorySessionStore();
    const asked: string[] = [];
    const first = bound(store, "chat-permission", {
      // Never answers: the first replica goes away while a human would still be deciding.
      onPermissionRequest: (request) => (
        asked.push(request.toolCall.toolCallId),
        new Promise(() => undefined)
      ),
    });
    await first.connect();
    const { sessionId } = await first.newSession({ cwd: "/tmp" });
    void first
      .prompt({ sessionId, prompt: "echo before; permission deploy; echo after" })
      .catch(() => undefined);
    const follower = follow(store, "chat-permission");
    await waitFor(() => follower.events.some((e) => e.event.type === "permission"), 10_000);
    await first.release();
    const held = (await store.sessions.get("chat-permission"))!;
    const request = follower.events.find((e) => e.event.type === "permission")!;
    assert.notEqual(held.lastEventId, request.eventId, "the resume point stays before the open request");

    const second = await reattach(store, "chat-permission", {
      onPermissionRequest: () => ({ outcome: "selected", optionId: "allow_once" }),
    });
    await waitFor(() => follower.events.at(-1)?.event.type === "turnEnded", 10_000, "the turn to finish");
    follower.close();
    assert.deepEqual(texts(follower.events), ["before", "permission: selected allow_once", "after"]);
    assert.equal(
      follower.events.filter((e) => e.event.type === "permission").length,
      1,
      "the request is mirrored once, though it was sent twice",
    );
    assert.equal(asked.length, 1);
    await second.disconnect();
  });

  test("when the server no longer has the connection, a new one reopens the agent session", async () => {
    const store = memorySessionStore();
    const first = bound(store, "chat-gone");
    await first.connect();
    const { sessionId } = await first.newSession({ cwd: "/tmp" });
    await first.prompt({ sessionId, prompt: "echo one" });
    const oldConnection = (await store.sessions.get("chat-gone"))!.connectionId;
    await first.release();
    // The connection ends behind the store's back (as after a server restart or an idle expiry).
    await fetch(`${fixture.server.baseUrl}/v2/rpc`, {
      method: "DELETE",
      headers: fixture.server.headers({ "acp-connection-id": oldConnection! }),
    });

    const second = await reattach(store, "chat-gone");
    const now = (await store.sessions.get("chat-gone"))!;
    assert.notEqual(now.connectionId, oldConnection, "a new connection is recorded");
    assert.equal(second.agentSessionId, sessionId, "the agent session was reopened (session/resume)");
    assert.equal((await second.prompt({ sessionId, prompt: "echo two" })).stopReason, "end_turn");
    const follower = follow(store, "chat-gone");
    await waitFor(() => texts(follower.events).at(-1) === "two", 10_000);
    follower.close();
    assert.deepEqual(texts(follower.events), ["one", "two"]);
    await second.disconnect();
  });

  test("bad input: store without sessionId, a new record without sandboxKey, reattach to nothing", async () => {
    const store = memorySessionStore();
    assert.throws(
      () => new SandboxAgentClient({ baseUrl: "http://127.0.0.1:1", agent: "mock", store }),
      /`store` and `sessionId` go together/,
    );
    const client = fixture.client({ store, sessionId: "chat-new", autoConnect: false });
    await assert.rejects(client.connect(), /not in the store yet: pass sandboxKey/);
    await assert.rejects(reattach(store, "chat-missing"), /no session "chat-missing" in the store/);
    await store.sessions.create({ id: "chat-nowhere", sandboxKey: "box-9", agent: "mock" });
    await assert.rejects(
      SandboxAgentClient.reattach({ store, sessionId: "chat-nowhere", token: TOKEN }),
      /sandbox "box-9" of session "chat-nowhere" has no recorded endpoint/,
    );
  });
});
