import assert from "node:assert/strict";
import { connect as connectH2, type ClientHttp2Session } from "node:http2";
import { describe, it } from "node:test";
import { mockAgentBin, startServer, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { mockWith, stdinLog } from "./support/agents.js";
import { isRunning, processesWith } from "./support/procs.js";
import { RawConnection } from "./support/rpc.js";

const INITIALIZE = JSON.stringify({
  jsonrpc: "2.0",
  id: 0,
  method: "initialize",
  params: { protocolVersion: 1, _meta: { "sandboxagent.dev": { agent: "stubborn" } } },
});

/** An agent only SIGKILL ends: it ignores stdin EOF and SIGTERM. `log` marks its processes. */
function stubbornAgent(log: string) {
  return mockWith("--ignore-stdin-eof", "--ignore-sigterm", "--stdin-log", log);
}

/** `initialize` over HTTP/1.1; a refused or cut connection is reported as `"network"`. */
async function initialize(server: RunningServer): Promise<{ status: number | "network"; body: string }> {
  try {
    const response = await fetch(`${server.baseUrl}/v2/rpc`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: INITIALIZE,
    });
    return { status: response.status, body: await response.text() };
  } catch {
    return { status: "network", body: "" };
  }
}

/** `initialize` on an HTTP/2 session opened earlier (a kept-alive connection). */
/**
 * An initialize over an open HTTP/2 session. "refused" when the server's GOAWAY (sent as it stops
 * accepting) came first: the stream was refused unprocessed, which RFC 9113 §8.7 makes safe to retry.
 */
function initializeOver(session: ClientHttp2Session): Promise<{ status: number | "refused"; body: string }> {
  return new Promise((resolve, reject) => {
    const stream = session.request({
      ":method": "POST",
      ":path": "/v2/rpc",
      "content-type": "application/json",
    });
    let body = "";
    let status = 0;
    stream.setEncoding("utf8");
    stream.on("response", (h) => (status = Number(h[":status"])));
    stream.on("data", (c: string) => (body += c));
    stream.on("end", () => resolve({ status, body }));
    stream.on("error", (error: Error & { code?: string }) =>
      error.code === "ERR_HTTP2_STREAM_ERROR" && /REFUSED_STREAM/.test(error.message)
        ? resolve({ status: "refused", body: "" })
        : reject(error),
    );
    stream.end(INITIALIZE);
  });
}

/** A server running two connections whose agents only SIGKILL ends; `log` marks them, `pids` are theirs. */
async function withStubbornAgents(killGraceMs: number) {
  const log = stdinLog();
  const server = await startServer({
    config: { agents: { stubborn: stubbornAgent(log) }, limits: { killGraceMs } },
  });
  await Promise.all([RawConnection.open(server, "stubborn"), RawConnection.open(server, "stubborn")]);
  const pids = processesWith(log);
  assert.equal(pids.length, 2);
  return { server, log, pids };
}

function exitOf(server: RunningServer): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => server.process.once("exit", (code, signal) => resolve({ code, signal })));
}

/** Fails listing the agents still running, and kills them so they do not outlive the test. */
function assertAllGone(pids: Iterable<number>): void {
  const running = [...pids].filter(isRunning);
  for (const pid of running) process.kill(pid, "SIGKILL");
  assert.deepEqual(running, [], "agents outlived the server");
}

describe("server shutdown", () => {
  it("stops every agent before exiting: one still stopping after DELETE, one whose initialize is in flight", async () => {
    const deletedLog = stdinLog();
    const silentMarker = `silent-agent-${process.pid}-${Date.now()}`;
    const server = await startServer({
      config: {
        agents: {
          stubborn: {
            command: "sh",
            args: ["-c", `trap "" TERM; node "$0" --stdin-log ${deletedLog}; sleep 30`, mockAgentBin],
          },
          // Never answers initialize and ignores SIGTERM.
          silent: { command: "sh", args: ["-c", `trap "" TERM; while :; do sleep 0.2; done`, silentMarker] },
        },
        limits: { killGraceMs: 1000 },
      },
    });
    try {
      const deleted = await RawConnection.open(server, "stubborn");
      assert.equal((await deleted.delete()).status, 202); // its gentle stop now waits 1 s per step
      const initializing = RawConnection.open(server, "silent").catch(() => undefined);
      await waitFor(() => processesWith(silentMarker).length > 0, 5000, "silent agent to start");

      const started = Date.now();
      const exited = new Promise<number | null>((resolve) => server.process.once("exit", resolve));
      server.process.kill("SIGTERM");
      assert.equal(await exited, 0);
      // SIGTERM at once, SIGKILL one grace period later: well inside a supervisor's patience.
      assert.ok(Date.now() - started < 2500, `shutdown took ${Date.now() - started} ms`);
      assert.deepEqual(processesWith(deletedLog), [], "the deleted connection's agent outlived the server");
      assert.deepEqual(processesWith(silentMarker), [], "the initializing agent outlived the server");
      await initializing;
    } finally {
      await server.stop();
      for (const pid of [...processesWith(deletedLog), ...processesWith(silentMarker)])
        process.kill(pid, "SIGKILL");
    }
  });

  it("initializes racing SIGTERM: none starts an agent that survives; a kept-alive session gets a 503 or a refused stream", async () => {
    const log = stdinLog();
    const server = await startServer({
      config: { agents: { stubborn: stubbornAgent(log) }, limits: { killGraceMs: 3000 } },
    });
    const seen = new Set<number>();
    const track = () => processesWith(log).forEach((pid) => seen.add(pid));
    const tracker = setInterval(track, 5);
    const session = connectH2(server.baseUrl);
    try {
      const results: Array<{ status: number | "network"; body: string }> = [];
      const fire = () => initialize(server).then((r) => void results.push(r));
      const before = Array.from({ length: 8 }, fire);
      await waitFor(() => (track(), seen.size >= 2), 15_000, "agents to start");
      const exited = exitOf(server);
      server.process.kill("SIGTERM");
      // Once the server is draining (the stubborn agents hold it there for the grace), more
      // initializes: on a kept-alive session, and on new sockets.
      await waitFor(() => /shutting down/.test(server.logs()), 15_000, "the shutdown to begin");
      const keptAnswer = initializeOver(session);
      const during = Array.from({ length: 8 }, fire);
      const kept = await keptAnswer;
      if (kept.status !== "refused") {
        assert.equal(kept.status, 503, kept.body);
        assert.equal((JSON.parse(kept.body) as { reason: string }).reason, "shutting_down");
      }
      assert.deepEqual(await exited, { code: 0, signal: null });
      await Promise.all([...before, ...during]);
      track();
      // Each got an agent's answer, a 503, or a refused connection: never a 5xx of another kind.
      for (const r of results) assert.ok([200, 503, "network"].includes(r.status), `${r.status} ${r.body}`);
      assert.ok(seen.size >= 2);
      assertAllGone(seen);
    } finally {
      clearInterval(tracker);
      session.destroy();
      await server.stop();
      assertAllGone(processesWith(log));
    }
  });

  it("a second SIGTERM hurries the shutdown: every agent is SIGKILLed now, none is orphaned", async () => {
    // A grace far longer than the test: only the second signal can end it in time.
    const { server, log, pids } = await withStubbornAgents(60_000);
    try {
      const exited = exitOf(server);
      server.process.kill("SIGTERM");
      await waitFor(() => /shutting down/.test(server.logs()), 5000, "the shutdown to begin");
      assert.equal(server.process.exitCode, null, "the first SIGTERM waits for the agents");
      const started = Date.now();
      server.process.kill("SIGTERM");
      assert.deepEqual(await exited, { code: 0, signal: null });
      assert.ok(Date.now() - started < 5000, `exited ${Date.now() - started} ms after the second signal`);
      assertAllGone(pids);
    } finally {
      await server.stop();
      assertAllGone(processesWith(log));
    }
  });

  it("a SIGKILLed server takes its agents with it (the orphan guard)", async () => {
    const { server, log, pids } = await withStubbornAgents(500);
    try {
      const exited = exitOf(server);
      server.process.kill("SIGKILL");
      assert.equal((await exited).signal, "SIGKILL");
      // SIGTERM at once (ignored here), SIGKILL one killGraceMs later.
      await waitFor(() => !pids.some(isRunning), 10_000, "the agents to be killed");
    } finally {
      assertAllGone(processesWith(log));
    }
  });
});
