import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startServer, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { mockWith, stdinLog } from "./support/agents.js";
import { processesWith } from "./support/procs.js";
import { openSession, RawConnection } from "./support/rpc.js";

const hangLog = stdinLog();
const failLog = stdinLog();
const abortLog = stdinLog();

function initBody(agent: string, id: number | null | "none" = 1): string {
  return JSON.stringify({
    jsonrpc: "2.0",
    ...(id === "none" ? {} : { id }),
    method: "initialize",
    params: { protocolVersion: 1, _meta: { "sandboxagent.dev": { agent } } },
  });
}

describe("initialize", () => {
  let server: RunningServer;
  const post = (body: string, headers: Record<string, string> = {}) =>
    fetch(`${server.baseUrl}/v2/rpc`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body,
    });

  before(async () => {
    server = await startServer({
      config: {
        agents: {
          missing: { command: "/nonexistent/agent-binary" },
          hang: mockWith("--hang-initialize", "--stdin-log", hangLog),
          failinit: mockWith("--fail-initialize", "--stdin-log", failLog),
          slowinit: mockWith("--hang-initialize", "--stdin-log", abortLog),
          exits: mockWith("--exit-on-start", "3"),
        },
        // Long enough for an agent to start on a busy machine, short enough for the hang test.
        limits: { initializeTimeoutMs: 5000 },
      },
    });
  });
  after(() => server.stop());

  it("answers 200 JSON with the agent's result and a visible-ASCII connection id in both headers", async () => {
    const response = await post(initBody("mock"));
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type")!, /^application\/json/);
    const id = response.headers.get("acp-connection-id")!;
    assert.match(id, /^[\x21-\x7e]{1,1024}$/);
    assert.equal(response.headers.get("x-acp-connection-id"), id);
    const body = (await response.json()) as { id: number; result: { protocolVersion: number } };
    assert.equal(body.id, 1);
    assert.equal(body.result.protocolVersion, 1);
  });

  it("the initialize response is not repeated on the SSE stream", async () => {
    const { sse, sessionId } = await openSession(server);
    assert.ok(sessionId);
    assert.equal(sse.messages().filter((m) => m.id === 0).length, 0);
    sse.close();
  });

  it("initialize on an existing connection is 400", async () => {
    const conn = await RawConnection.open(server);
    const response = await post(initBody("mock"), { "acp-connection-id": conn.id });
    assert.equal(response.status, 400);
    assert.equal(response.headers.get("content-type"), "application/problem+json");
  });

  it("initialize as a notification or with id null is 400", async () => {
    for (const id of ["none", null] as const) {
      const response = await post(initBody("mock", id));
      assert.equal(response.status, 400);
      assert.equal(response.headers.get("acp-connection-id"), null);
    }
  });

  it("a missing agent binary is 502 problem+json, no connection id", async () => {
    const response = await post(initBody("missing"));
    assert.equal(response.status, 502);
    assert.equal(response.headers.get("content-type"), "application/problem+json");
    assert.equal(response.headers.get("acp-connection-id"), null);
    const problem = (await response.json()) as {
      title: string;
      spawnError: string;
      status: number;
      detail: string;
    };
    assert.equal(problem.status, 502);
    assert.match(problem.spawnError, /ENOENT/);
  });

  it("an agent that exits at start is 502 with its exit code", async () => {
    const response = await post(initBody("exits"));
    assert.equal(response.status, 502);
    const problem = (await response.json()) as { code: number };
    assert.equal(problem.code, 3);
  });

  it("an agent error answer is returned without a usable connection, and the process is killed", async () => {
    const response = await post(initBody("failinit"));
    assert.equal(response.status, 502);
    assert.equal(response.headers.get("acp-connection-id"), null);
    const problem = (await response.json()) as { response: { error: { code: number } } };
    assert.equal(problem.response.error.code, -32602);
    await waitFor(() => processesWith(failLog).length === 0, 8000, "failing agent to exit");
  });

  it("an agent that never answers gives 504 after the timeout and is killed", async () => {
    const started = Date.now();
    const response = await post(initBody("hang"));
    assert.equal(response.status, 504);
    assert.ok(Date.now() - started >= 4900, "waited for the configured timeout");
    await waitFor(() => processesWith(hangLog).length === 0, 8000, "hung agent to exit");
  });

  it("a client that aborts initialize leaves no process behind", async () => {
    const controller = new AbortController();
    const pending = fetch(`${server.baseUrl}/v2/rpc`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: initBody("slowinit"),
      signal: controller.signal,
    }).catch((e: Error) => e);
    await waitFor(() => processesWith(abortLog).length > 0, 5000, "agent to start");
    controller.abort();
    assert.ok((await pending) instanceof Error);
    await waitFor(() => processesWith(abortLog).length === 0, 8000, "aborted agent to exit");
    const health = (await (await fetch(`${server.baseUrl}/v2/health`)).json()) as { connections: number };
    assert.ok(health.connections >= 0);
  });

  it("session/new before initialize is rejected by the agent itself (-32600), not by us", async () => {
    // Over HTTP a connection only exists after initialize, so a non-initialize first message is 400.
    const response = await post(JSON.stringify({ jsonrpc: "2.0", id: 5, method: "session/new", params: {} }));
    assert.equal(response.status, 400);
  });

  it("an unknown agent id is 400 naming the available agents", async () => {
    const response = await post(initBody("nope"));
    assert.equal(response.status, 400);
    const problem = (await response.json()) as { availableAgents: string[] };
    assert.ok(problem.availableAgents.includes("mock"));
  });
});

// Its own server with the default initialize timeout: one in 100 agent starts on a busy machine may
// take longer than the 5 s above, which the hang test needs.
describe("initialize ids", () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer();
  });
  after(() => server.stop());

  it("100 initializes give 100 distinct UUIDv4 ids", async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 100; i++) {
      const response = await fetch(`${server.baseUrl}/v2/rpc`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: initBody("mock"),
      });
      const id = response.headers.get("acp-connection-id")!;
      assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      ids.add(id);
      await fetch(`${server.baseUrl}/v2/rpc`, { method: "DELETE", headers: { "acp-connection-id": id } });
    }
    assert.equal(ids.size, 100);
  });
});
