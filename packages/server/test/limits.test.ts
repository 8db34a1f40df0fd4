import assert from "node:assert/strict";
import { connect as connectH2, type ClientHttp2Session } from "node:http2";
import { connect, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import { startServer, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { mockWith, stdinLog } from "./support/agents.js";
import { processesWith } from "./support/procs.js";
import { RawConnection } from "./support/rpc.js";

/** A minimal agent (`sh` and `cat`; `marker` on the shell's command line): answers `initialize` id 0, then waits for stdin EOF. */
function tinyAgent(marker: string) {
  const answer = JSON.stringify({
    jsonrpc: "2.0",
    id: 0,
    result: { protocolVersion: 1, agentCapabilities: {} },
  });
  return { command: "sh", args: ["-c", `read line; echo '${answer}'; cat >/dev/null`, marker] };
}

function initialize(server: RunningServer, agent: string): Promise<Response> {
  return fetch(`${server.baseUrl}/v2/rpc`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: { protocolVersion: 1, _meta: { "sandboxagent.dev": { agent } } },
    }),
  });
}

async function problemOf(response: Response): Promise<Record<string, unknown>> {
  assert.equal(response.headers.get("content-type"), "application/problem+json");
  return (await response.json()) as Record<string, unknown>;
}

async function assertAlive(server: RunningServer): Promise<void> {
  assert.equal(server.process.exitCode, null, `the server exited:\n${server.logs().slice(-2000)}`);
  assert.equal((await fetch(`${server.baseUrl}/v2/health`)).status, 200);
}

/** A raw TCP socket to the server, with what it received and whether it closed. */
function rawSocket(
  server: RunningServer,
  send?: string,
): Promise<{ socket: Socket; received(): string; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    let text = "";
    const socket = connect(server.port, "127.0.0.1", () => {
      if (send !== undefined) socket.write(send);
      resolve({ socket, received: () => text, closed });
    });
    const closed = new Promise<void>((done) => socket.once("close", () => done()));
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (text += chunk));
    socket.on("error", () => {});
    socket.once("error", reject);
  });
}

describe("connection and socket caps", () => {
  it("initializes past limits.maxConnections get a 503 with Retry-After; the server lives on", async () => {
    const marker = `tiny-capped-${process.pid}-${Date.now()}`;
    const server = await startServer({
      config: { agents: { tiny: tinyAgent(marker) }, limits: { maxConnections: 4 } },
    });
    try {
      const answers = await Promise.all(Array.from({ length: 12 }, () => initialize(server, "tiny")));
      const ok = answers.filter((r) => r.status === 200);
      const refused = answers.filter((r) => r.status === 503);
      assert.equal(ok.length, 4, answers.map((r) => r.status).join(" "));
      assert.equal(refused.length, 8);
      for (const response of refused) {
        assert.equal(response.headers.get("retry-after"), "1");
        const problem = await problemOf(response);
        assert.equal(problem.limit, 4);
        assert.match(String(problem.detail), /limits\.maxConnections/);
      }
      assert.equal(processesWith(marker).length, 4);
      await assertAlive(server);
      // Room again once an agent is gone.
      const id = ok[0]!.headers.get("acp-connection-id")!;
      await fetch(`${server.baseUrl}/v2/rpc`, { method: "DELETE", headers: { "acp-connection-id": id } });
      await waitFor(() => processesWith(marker).length === 3, 10_000, "the deleted agent to stop");
      assert.equal((await initialize(server, "tiny")).status, 200);
    } finally {
      await server.stop();
    }
  });

  it("the default caps keep descriptor headroom: under ulimit -n 256 a flood gets 503s, never a failed spawn", async () => {
    const marker = `tiny-derived-${process.pid}-${Date.now()}`;
    const server = await startServer({ nofile: 256, config: { agents: { tiny: tinyAgent(marker) } } });
    try {
      const statuses: number[] = [];
      for (let round = 0; round < 4; round++) {
        const answers = await Promise.all(Array.from({ length: 20 }, () => initialize(server, "tiny")));
        for (const r of answers) {
          statuses.push(r.status);
          if (r.status !== 200) assert.match(String((await problemOf(r)).detail), /limits\.maxConnections/);
        }
      }
      const ok = statuses.filter((s) => s === 200).length;
      assert.ok(ok >= 10 && ok < 80, `${ok} agents started under 256 descriptors`);
      assert.deepEqual(new Set(statuses.filter((s) => s !== 200)), new Set([503]));
      assert.doesNotMatch(server.logs(), /EMFILE/);
      await assertAlive(server);
    } finally {
      await server.stop();
    }
  });

  it("a spawn that fails for lack of descriptors (EMFILE) is a 503 problem, not a crash", async () => {
    const marker = `tiny-emfile-${process.pid}-${Date.now()}`;
    // Caps set far above what 128 descriptors allow: spawns fail first.
    const server = await startServer({
      nofile: 128,
      config: { agents: { tiny: tinyAgent(marker) }, limits: { maxConnections: 100, maxSockets: 100 } },
    });
    const ids: string[] = [];
    try {
      let problem: Record<string, unknown> | undefined;
      for (let i = 0; i < 40 && problem === undefined; i++) {
        const response = await initialize(server, "tiny");
        if (response.status === 200) ids.push(response.headers.get("acp-connection-id")!);
        else {
          assert.equal(response.status, 503, await response.clone().text());
          assert.equal(response.headers.get("retry-after"), "5");
          problem = await problemOf(response);
        }
      }
      assert.ok(problem, "spawns never failed");
      assert.match(String(problem.detail), /out of resources \((EMFILE|ENFILE)\)/);
      assert.equal(server.process.exitCode, null);
      for (const id of ids) {
        await fetch(`${server.baseUrl}/v2/rpc`, { method: "DELETE", headers: { "acp-connection-id": id } });
      }
      await waitFor(() => processesWith(marker).length === 0, 10_000, "agents to stop");
      await assertAlive(server);
      assert.equal((await initialize(server, "tiny")).status, 200);
    } finally {
      await server.stop();
    }
  });

  describe("limits.maxSockets", () => {
    let server: RunningServer;
    const sockets: Socket[] = [];

    before(async () => {
      server = await startServer({ config: { limits: { maxSockets: 10, headersTimeoutMs: 3000 } } });
    });
    after(async () => {
      for (const socket of sockets) socket.destroy();
      await server.stop();
    });

    it("silent sockets make room for new ones; busy ones get a 503, and the server lives on", async () => {
      const silent = await Promise.all(Array.from({ length: 10 }, () => rawSocket(server)));
      sockets.push(...silent.map((s) => s.socket));
      // Once they have been silent for a second, the oldest is closed for a client that sends its request.
      await waitFor(
        async () => {
          const health = await rawSocket(
            server,
            "GET /v2/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
          );
          await health.closed;
          return /^HTTP\/1\.1 200 /.test(health.received());
        },
        10_000,
        "a request to be served at the cap",
      );
      await Promise.race(silent.map((s) => s.closed));
      for (const s of silent) s.socket.destroy();

      // Sockets that have sent a request are not silent: ten kept-alive ones leave no room for an
      // 11th, which is told so with a 503 problem; closing one makes room again.
      const HEALTH = "GET /v2/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
      const kept: Array<Awaited<ReturnType<typeof rawSocket>>> = [];
      while (kept.length < 10) {
        const socket = await rawSocket(server, HEALTH);
        sockets.push(socket.socket);
        await waitFor(() => socket.received().includes("\r\n\r\n"), 10_000, "an answer");
        // A silent socket the server had not closed yet may still hold a place: then this is a 503.
        if (/^HTTP\/1\.1 200 /.test(socket.received())) kept.push(socket);
      }
      const refused = await rawSocket(server, HEALTH);
      await refused.closed;
      assert.match(refused.received(), /^HTTP\/1\.1 503 /);
      assert.match(refused.received(), /retry-after: 1/i);
      assert.match(refused.received(), /application\/problem\+json[\s\S]*limits\.maxSockets/);
      kept[0]!.socket.destroy();
      await waitFor(
        async () => {
          const health = await rawSocket(server, HEALTH.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n"));
          await health.closed;
          return /^HTTP\/1\.1 200 /.test(health.received());
        },
        10_000,
        "room once a socket closed",
      );
      await assertAlive(server);
    });
  });
});

describe("request timeouts", () => {
  let server: RunningServer;
  const log = stdinLog();

  before(async () => {
    server = await startServer({
      config: {
        agents: { logged: mockWith("--stdin-log", log) },
        limits: { headersTimeoutMs: 1000, requestTimeoutMs: 2000, keepAliveMs: 60_000 },
      },
    });
  });
  after(() => server.stop());

  it("a socket that sends nothing is closed after headersTimeoutMs", async () => {
    const started = Date.now();
    const silent = await rawSocket(server);
    await silent.closed;
    assert.ok(Date.now() - started < 8000, `closed after ${Date.now() - started} ms`);
  });

  it("HTTP/1.1: a body shorter than its Content-Length gets a 408 after requestTimeoutMs", async () => {
    const partial = await rawSocket(
      server,
      "POST /v2/rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
    );
    await partial.closed;
    assert.match(partial.received(), /^HTTP\/1\.1 408 /);
    await assertAlive(server);
  });

  it("HTTP/2: a stream whose body never completes gets a 408 problem; the session stays usable", async () => {
    const session: ClientHttp2Session = connectH2(server.baseUrl);
    try {
      const stream = session.request({
        ":method": "POST",
        ":path": "/v2/rpc",
        "content-type": "application/json",
        "content-length": "100",
      });
      stream.write("{");
      const status = await new Promise<number>((resolve) =>
        stream.once("response", (h) => resolve(Number(h[":status"]))),
      );
      assert.equal(status, 408);
      let body = "";
      stream.setEncoding("utf8");
      stream.on("data", (c: string) => (body += c));
      await new Promise((resolve) => stream.once("close", resolve));
      assert.match(body, /limits\.requestTimeoutMs/);
      const health = session.request({ ":path": "/v2/health" });
      const healthStatus = await new Promise<number>((resolve) =>
        health.once("response", (h) => resolve(Number(h[":status"]))),
      );
      assert.equal(healthStatus, 200);
      health.close();
    } finally {
      session.close();
    }
  });

  it("an SSE stream is a response, not a request: it outlives requestTimeoutMs", async () => {
    const conn = await RawConnection.open(server, "logged");
    const sse = await conn.openSse();
    const sessionId = await conn.newSession(sse);
    // Longer than requestTimeoutMs (2 s) plus Node's check interval, with no keep-alive comment meanwhile.
    await new Promise((resolve) => setTimeout(resolve, 3500));
    const done = await conn.prompt(sse, sessionId, "echo still here");
    assert.equal(done.result?.stopReason, "end_turn");
    sse.close();
    await conn.delete();
  });
});
