import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import { waitFor } from "@sandbox-agent/testkit";
import { type ServerSetup, setup, withRestarts } from "./support/durable.js";
import { agentText, openSession, RawConnection, type RpcMessage } from "./support/rpc.js";

/** One table of the server's index as a restarted server reads it: the snapshot, then the journal replayed. */
function indexTable(dataDir: string, name: string): Map<string, unknown> {
  const dir = path.join(dataDir, "event-log");
  let tables: Record<string, Record<string, unknown>> = {};
  try {
    tables = JSON.parse(readFileSync(path.join(dir, "index.json"), "utf8")) as typeof tables;
  } catch {
    // No snapshot yet: everything is in the journal.
  }
  const table = new Map(Object.entries(tables[name] ?? {}));
  for (const line of readFileSync(path.join(dir, "index.journal"), "utf8").split("\n")) {
    if (!line) continue;
    const [table_, key, ...value] = JSON.parse(line) as [string, string, unknown?];
    if (table_ !== name) continue;
    if (value.length === 0) table.delete(key);
    else table.set(key, value[0]);
  }
  return table;
}

/** Every file under `dir`, recursively. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    return statSync(file).isDirectory() ? filesUnder(file) : [file];
  });
}

/** The mock agent's own record of a session (what a restarted agent loads). */
function mockSessionFile(s: ServerSetup, sessionId: string): string {
  return path.join(s.stateDir, `${encodeURIComponent(sessionId)}.json`);
}

const updatesOf = (messages: RpcMessage[], sessionId: string) =>
  messages.filter((m) => m.method === "session/update" && m.params?.sessionId === sessionId);

describe("durable connections: extension state survives a server restart", () => {
  it("SIGKILL: a detached session stays detached (re-attached, its updates still dropped) until the client loads it; a terminated one stays ended", async () => {
    const s = setup();
    await withRestarts(s, async (run) => {
      const { conn, sse, sessionId: detached } = await openSession(run.server);
      const watched = await conn.newSession(sse);
      const ended = await conn.newSession(sse);
      await conn.prompt(sse, detached, "echo before the detach");
      assert.equal(
        (await conn.call(sse, "_sandboxagent/session/detach", { sessionId: detached })).error,
        undefined,
      );
      const terminated = await conn.call(sse, "_sandboxagent/session/terminate", { sessionId: ended });
      assert.equal(terminated.error, undefined, JSON.stringify(terminated));
      await run.restart("SIGKILL", sse);
      const again = conn.on(run.server);
      const rest = await again.openSse(sse.lastId());
      // The detached session still works (its prompts are answered) but shows nothing.
      const quiet = await again.prompt(rest, detached, "echo while detached", 30_000);
      assert.equal(quiet.result?.stopReason, "end_turn", JSON.stringify(quiet));
      const loud = await again.prompt(rest, watched, "echo watched", 30_000);
      assert.equal(loud.result?.stopReason, "end_turn", JSON.stringify(loud));
      assert.equal(agentText(rest.messages(), watched), "watched");
      assert.deepEqual(updatesOf(rest.messages(), detached), [], "updates of the detached session delivered");
      // The terminated session is still known to this connection (terminate is idempotent: no
      // second ended event) and was not loaded again.
      const again2 = await again.call(rest, "_sandboxagent/session/terminate", { sessionId: ended });
      assert.equal(again2.error, undefined, JSON.stringify(again2));
      assert.deepEqual(
        rest.messages().filter((m) => m.method === "_sandboxagent/session/ended"),
        [],
        "a session ended again after the restart",
      );
      // A session/load re-attaches the detached session, as before the restart: the replay is delivered.
      const load = await again.call(
        rest,
        "session/load",
        { sessionId: detached, cwd: process.cwd(), mcpServers: [] },
        30_000,
      );
      assert.equal(load.error, undefined, JSON.stringify(load));
      assert.match(agentText(rest.messages(), detached), /before the detach.*while detached/s);
      const after = await again.prompt(rest, detached, "echo attached", 30_000);
      assert.equal(after.result?.stopReason, "end_turn", JSON.stringify(after));
      assert.match(agentText(rest.messages(), detached), /attached$/);
    });
  });

  it("SIGKILL: model and mode set through set_metadata answer from the store, and are switched to again on an agent that forgot them", async () => {
    const secret = "never-on-disk-7f3a9c";
    const s = setup({ config: { allowClientEnv: ["MOCK_SECRET"] } });
    await withRestarts(s, async (run) => {
      const conn = await RawConnection.open(run.server, "mock", {
        _meta: { "sandboxagent.dev": { agent: "mock", env: { MOCK_SECRET: secret } } },
      });
      const sse = await conn.openSse(null);
      const sessionId = await conn.newSession(sse);
      const set = await conn.call(sse, "_sandboxagent/session/set_metadata", {
        sessionId,
        metadata: { model: "mock-smart", mode: "plan" },
      });
      assert.equal(set.error, undefined, JSON.stringify(set));
      await run.kill("SIGKILL", sse);
      // An agent that keeps its sessions but not their model and mode.
      const file = mockSessionFile(s, sessionId);
      const stored = JSON.parse(readFileSync(file, "utf8")) as { model: string; modeId: string };
      assert.deepEqual([stored.model, stored.modeId], ["mock-smart", "plan"]);
      writeFileSync(file, JSON.stringify({ ...stored, model: "mock-fast", modeId: "default" }));

      await run.start();
      const again = conn.on(run.server);
      const rest = await again.openSse(sse.lastId());
      // Before the agent is started again, from the store: the agent's list, not just the hint.
      const models = await again.call(rest, "_sandboxagent/session/list_models", { sessionId });
      assert.equal(models.result?.currentModelId, "mock-smart", JSON.stringify(models));
      assert.equal((models.result?.availableModels as unknown[]).length, 2, JSON.stringify(models));
      assert.doesNotMatch(run.server.logs(), /agent started again/);
      const list = await again.call(rest, "session/list", {});
      const entry = (
        list.result?.sessions as Array<{ sessionId: string; _meta: Record<string, Record<string, unknown>> }>
      ).find((e) => e.sessionId === sessionId)!;
      assert.equal(entry._meta["sandboxagent.dev"]!.mode, "plan", JSON.stringify(entry));

      // The first use starts the agent again; the switches come before the prompt reaches it.
      const reply = await again.prompt(rest, sessionId, "echo hi", 30_000);
      assert.equal(reply.result?.stopReason, "end_turn", JSON.stringify(reply));
      const now = JSON.parse(readFileSync(file, "utf8")) as { model: string; modeId: string };
      assert.deepEqual([now.model, now.modeId], ["mock-smart", "plan"]);
      // The switches' own notifications are the server's business, not shown to the client.
      const kinds = updatesOf(rest.messages(), sessionId).map(
        (m) => (m.params!.update as { sessionUpdate: string }).sessionUpdate,
      );
      assert.ok(
        !kinds.includes("config_option_update") && !kinds.includes("current_mode_update"),
        kinds.join(", "),
      );
      const later = await again.call(rest, "_sandboxagent/session/list_models", { sessionId });
      assert.equal(later.result?.currentModelId, "mock-smart", JSON.stringify(later));

      // Secrets never touch the disk, extension state included.
      for (const f of filesUnder(s.dataDir))
        assert.ok(!readFileSync(f).includes(secret), `the client's env value was written to ${f}`);

      // The saved state lives as long as the connection: a DELETE removes it from the index.
      assert.ok(indexTable(s.dataDir, "connectionState").has(conn.id), "no saved state to remove");
      assert.equal((await again.delete()).status, 202);
      await waitFor(() => !indexTable(s.dataDir, "connectionState").has(conn.id), 10_000, "the row removed");
    });
  });
});
