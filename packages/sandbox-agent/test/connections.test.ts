import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { SandboxAgentHttpError } from "../src/index.js";
import { useServer } from "./helpers.js";

const fixture = useServer();

describe("SDK connections", () => {
  test("list() and get() show another client's connection with its sessions' metadata", async () => {
    const app = fixture.client();
    const { sessionId } = await app.newSession({ cwd: "/tmp/listed", metadata: { title: "Listed" } });
    await app.prompt({ sessionId, prompt: "echo hi" });

    const watcher = fixture.client({ autoConnect: false });
    const connections = await watcher.connections.list();
    const listed = connections.find((c) => c.sessions.some((s) => s.sessionId === sessionId));
    assert.ok(listed, JSON.stringify(connections));
    assert.equal(listed.agentId, "mock");
    assert.equal(listed.state, "open");
    assert.equal(typeof listed.pid, "number");
    assert.ok(listed.eventCount > 0);
    const session = listed.sessions.find((s) => s.sessionId === sessionId)!;
    assert.equal(session.title, "Listed");
    assert.equal(session.cwd, "/tmp/listed");
    assert.ok(session.eventCount >= 1);

    assert.deepEqual((await watcher.connections.get(listed.id)).sessions, listed.sessions);
    await assert.rejects(watcher.connections.get("no-such-connection"), (error: unknown) => {
      assert.ok(error instanceof SandboxAgentHttpError);
      assert.equal(error.status, 404);
      return true;
    });
  });

  test("attach continues a connection nobody reads, and is refused while another client reads it", async () => {
    const app = fixture.client();
    const { sessionId } = await app.newSession({ cwd: "/tmp" });
    const connectionId = app.connectionId!;
    const early = fixture.client({ autoConnect: false, attach: connectionId, connectTimeoutMs: 5_000 });
    await assert.rejects(early.connect());
    await app.release();

    const watcher = fixture.client({ autoConnect: false, attach: connectionId });
    await watcher.connect();
    assert.equal(watcher.connectionId, connectionId);
    const result = await watcher.prompt({ sessionId, prompt: "echo attached" });
    assert.equal(result.stopReason, "end_turn");
    assert.equal((await watcher.connections.get(connectionId)).attached, true);
  });
});
