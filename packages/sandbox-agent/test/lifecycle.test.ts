import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { startServer, waitFor } from "@sandbox-agent/testkit";
import {
  AlreadyConnectedError,
  NotConnectedError,
  SandboxAgentHttpError,
  type SandboxAgentClient,
} from "../src/index.js";
import { TOKEN, healthConnections, messageTexts, record, useServer } from "./helpers.js";

const fixture = useServer();

/** Every call that needs the agent connection, with valid-looking arguments. */
const SESSION_CALLS: Record<string, (c: SandboxAgentClient) => Promise<unknown>> = {
  newSession: (c) => c.newSession({ cwd: "/tmp" }),
  loadSession: (c) => c.loadSession({ sessionId: "s", cwd: "/tmp" }),
  resumeSession: (c) => c.resumeSession({ sessionId: "s", cwd: "/tmp" }),
  forkSession: (c) => c.forkSession({ sessionId: "s", cwd: "/tmp" }),
  prompt: (c) => c.prompt({ sessionId: "s", prompt: "echo hi" }),
  cancel: (c) => c.cancel({ sessionId: "s" }),
  setSessionMode: (c) => c.setSessionMode({ sessionId: "s", modeId: "plan" }),
  setSessionConfigOption: (c) =>
    c.setSessionConfigOption({ sessionId: "s", configId: "mode", value: "plan" }),
  setSessionModel: (c) => c.setSessionModel({ sessionId: "s", modelId: "mock-smart" }),
  listSessions: (c) => c.listSessions(),
  listModels: (c) => c.listModels({ sessionId: "s" }),
  setMetadata: (c) => c.setMetadata({ sessionId: "s", metadata: { a: 1 } }),
  detachSession: (c) => c.detachSession({ sessionId: "s" }),
  terminateSession: (c) => c.terminateSession({ sessionId: "s" }),
};

async function assertAllGated(client: SandboxAgentClient): Promise<void> {
  for (const [name, call] of Object.entries(SESSION_CALLS)) {
    await assert.rejects(call(client), NotConnectedError, `${name} must be gated`);
  }
}

describe("connection lifecycle", () => {
  test("a server that dies fails pending and new calls and reports disconnected", async () => {
    const doomed = await startServer({ token: TOKEN });
    try {
      const client = fixture.client({ baseUrl: doomed.baseUrl });
      const events = record(client);
      const { sessionId } = await client.newSession({ cwd: "/tmp" });
      const pending = client.prompt({ sessionId, prompt: "echo started; sleep 60000" });
      await waitFor(() => messageTexts(events, sessionId).includes("started"), 10_000, "the turn to start");
      doomed.process.kill("SIGKILL");
      await assert.rejects(client.listSessions(), NotConnectedError);
      await assert.rejects(pending, NotConnectedError);
      assert.equal(client.connected, false);
      const disconnected = events.find((e) => e.type === "disconnected");
      assert.ok(
        disconnected?.type === "disconnected" && disconnected.reason === "error",
        JSON.stringify(disconnected),
      );
    } finally {
      await doomed.stop();
    }
  });

  test("auto-connects in the constructor; a call made right away waits for the connection", async () => {
    const client = fixture.client();
    assert.equal(client.connected, false, "the handshake cannot have finished synchronously");
    const session = await client.newSession({ cwd: "/tmp" });
    assert.match(session.sessionId, /\S/);
    assert.equal(client.connected, true);
    assert.equal(client.agentInfo?.name, "sandbox-agent-mock");
    const result = await client.prompt({ sessionId: session.sessionId, prompt: "echo ready" });
    assert.equal(result.stopReason, "end_turn");
    await client.disconnect();
  });

  test("autoConnect: false opens nothing until connect()", async () => {
    const before = await healthConnections(fixture);
    const requests: string[] = [];
    const recording: typeof fetch = (input, init) => {
      requests.push(`${init?.method ?? "GET"} ${new URL(String(input)).pathname}`);
      return fetch(input, init);
    };
    const client = fixture.client({ autoConnect: false, fetch: recording });
    // A round trip through the same fetch: had the constructor started a connection, its initialize
    // POST would be recorded before this GET (it is, with autoConnect on).
    await client.health();
    assert.deepEqual(requests, ["GET /v2/health"]);
    assert.equal(client.connected, false);
    assert.equal(await healthConnections(fixture), before, "no server connection was opened");
    await assert.rejects(client.newSession({ cwd: "/tmp" }), NotConnectedError);
    await client.connect();
    assert.equal(client.connected, true);
    assert.equal(await healthConnections(fixture), before + 1);
    await client.disconnect();
    await waitFor(
      async () => (await healthConnections(fixture)) === before,
      5000,
      "server connection closed",
    );
  });

  test("every session call is gated before connect() and after disconnect()", async () => {
    const client = fixture.client({ autoConnect: false });
    await assertAllGated(client);
    await client.connect();
    await client.listSessions();
    await client.disconnect();
    assert.equal(client.connected, false);
    await assertAllGated(client);
    await client.connect();
    assert.ok(Array.isArray((await client.listSessions()).sessions), "usable again after reconnecting");
    await client.disconnect();
  });

  test("connect() twice throws AlreadyConnectedError and opens no second connection", async () => {
    const client = fixture.client({ autoConnect: false });
    const baseline = await healthConnections(fixture);
    const first = client.connect();
    await assert.rejects(client.connect(), AlreadyConnectedError, "while connecting");
    await first;
    await assert.rejects(client.connect(), AlreadyConnectedError, "while connected");
    assert.equal(await healthConnections(fixture), baseline + 1);
    await client.disconnect();
  });

  test("connect() during auto-connect throws AlreadyConnectedError", async () => {
    const client = fixture.client();
    await assert.rejects(client.connect(), AlreadyConnectedError);
    await client.listSessions();
    await client.disconnect();
  });

  test("disconnect() is a no-op when not connected", async () => {
    const client = fixture.client({ autoConnect: false });
    await client.disconnect();
    assert.equal(client.connected, false);
  });

  test("an unknown agent fails connect() with the server's problem details", async () => {
    const client = fixture.client({ autoConnect: false, agent: "no-such-agent" });
    const error = await client.connect().then(
      () => assert.fail("connect must fail"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof SandboxAgentHttpError, String(error));
    assert.equal(error.status, 400);
    assert.ok(Array.isArray(error.problem?.availableAgents), JSON.stringify(error.problem));
    assert.equal(client.connected, false);
  });

  test("a failed auto-connect makes calls throw NotConnectedError carrying the cause", async () => {
    const client = fixture.client({ token: "wrong-token" });
    const error = await client.newSession({ cwd: "/tmp" }).then(
      () => assert.fail("must fail"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof NotConnectedError, String(error));
    assert.ok(error.cause instanceof SandboxAgentHttpError, String(error.cause));
    assert.equal(error.cause.status, 401);
    await client.connect().catch((e: unknown) => assert.ok(e instanceof SandboxAgentHttpError));
  });

  test("a failed connect reports disconnected with the error and ends event iterators", async () => {
    const client = fixture.client({ autoConnect: false, agent: "no-such-agent" });
    const iterator = client.events();
    await assert.rejects(client.connect(), SandboxAgentHttpError);
    const seen = [];
    for await (const event of iterator) seen.push(event);
    assert.equal(seen.length, 1);
    const [event] = seen;
    assert.ok(event?.type === "disconnected" && event.reason === "error", JSON.stringify(event));
    assert.ok(event.error instanceof SandboxAgentHttpError);
  });
});
