import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { mockAgentBin, startServer, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { mockWith, stdinLog } from "./support/agents.js";
import { processesWith } from "./support/procs.js";
import { eventsProduced } from "./support/metrics.js";
import { agentText, openSession, RawConnection } from "./support/rpc.js";

const stubbornLog = stdinLog();
const deleteLog = stdinLog();
const idleLog = stdinLog();

describe("agent requests, cancellation, DELETE and process lifecycle", () => {
  let server: RunningServer;

  before(async () => {
    server = await startServer({
      config: {
        agents: {
          // The shell ignores SIGTERM and outlives the agent's exit on stdin EOF: only SIGKILL ends it.
          stubborn: {
            command: "sh",
            args: ["-c", `trap "" TERM; node "$0" --stdin-log ${stubbornLog}; sleep 30`, mockAgentBin],
          },
          deletable: mockWith("--stdin-log", deleteLog),
          idle: mockWith("--stdin-log", idleLog),
        },
        limits: { killGraceMs: 300, idleMs: 1500 },
      },
    });
  });
  after(() => server.stop());

  it("permission round trip with colliding ids; duplicate and unknown answers are dropped", async () => {
    const { conn, sse, sessionId } = await openSession(server);
    const promptId = await conn.send("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "permission publish" }],
    });
    const request = await sse.waitFor((m) => m.method === "session/request_permission");
    const options = (request.params!.options as Array<{ kind: string }>).map((o) => o.kind).sort();
    assert.deepEqual(options, ["allow_always", "allow_once", "reject_always", "reject_once"]);
    const answer = {
      jsonrpc: "2.0",
      id: request.id,
      result: { outcome: { outcome: "selected", optionId: "reject_once" } },
    };
    assert.equal((await conn.post(answer)).status, 202);
    assert.equal((await conn.post(answer)).status, 202, "a retried answer is accepted and dropped");
    assert.equal((await conn.post({ jsonrpc: "2.0", id: 987654, result: {} })).status, 202);
    const done = await sse.waitFor((m) => m.id === promptId);
    assert.equal(done.result?.stopReason, "end_turn");
    assert.match(agentText(sse.messages(), sessionId), /permission: selected reject_once/);
    const next = await conn.prompt(sse, sessionId, "echo still healthy");
    assert.equal(next.result?.stopReason, "end_turn");
    sse.close();
  });

  it("session/cancel ends a running turn with stopReason cancelled", async () => {
    const { conn, sse, sessionId } = await openSession(server);
    const promptId = await conn.send("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "slow 50 100" }],
    });
    await sse.waitFor((m) => m.method === "session/update"); // the turn is running
    assert.equal((await conn.notify("session/cancel", { sessionId })).status, 202);
    const done = await sse.waitFor((m) => m.id === promptId);
    assert.equal(done.result?.stopReason, "cancelled");
    sse.close();
  });

  it("dropping the SSE stream mid-turn does not cancel it; the turn is received whole", async () => {
    const { conn, sse: first, sessionId } = await openSession(server);
    const promptId = await conn.send("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "slow 8 100" }],
    });
    await first.waitFor((m) => m.method === "session/update");
    first.close();
    // The turn goes on with no reader: the server keeps producing its events.
    const produced = await eventsProduced(server);
    await waitFor(
      async () => (await eventsProduced(server)) >= produced + 2,
      10_000,
      "events while detached",
    );
    const second = await conn.openSse();
    const done = await second.waitFor((m) => m.id === promptId);
    assert.equal(done.result?.stopReason, "end_turn");
    const chunks = [...first.messages(), ...second.messages()].filter((m) => m.method === "session/update");
    assert.equal(chunks.length, 8);
    second.close();
  });

  it("DELETE is 202, ends the stream, stops the process; then 404 everywhere", async () => {
    const conn = await RawConnection.open(server, "deletable");
    const sse = await conn.openSse();
    await conn.newSession(sse);
    assert.equal(processesWith(deleteLog).length, 1);
    assert.equal((await conn.delete()).status, 202);
    await sse.done;
    await waitFor(() => processesWith(deleteLog).length === 0, 5000, "agent to exit");
    assert.equal((await conn.delete()).status, 404);
    assert.equal((await conn.post({ jsonrpc: "2.0", method: "_x" })).status, 404);
    assert.equal((await conn.get()).status, 404);
    const noHeader = await fetch(`${server.baseUrl}/v2/rpc`, { method: "DELETE" });
    assert.equal(noHeader.status, 400);
    const logFile = readFileSync(path.join(server.dataDir, "logs", "server.log"), "utf8");
    assert.match(logFile, /connection closed .*reason="deleted"/);
  });

  it("an agent that ignores SIGTERM is SIGKILLed after the grace period", async () => {
    const conn = await RawConnection.open(server, "stubborn");
    assert.ok(processesWith(stubbornLog).length >= 1);
    const started = Date.now();
    assert.equal((await conn.delete()).status, 202);
    await waitFor(() => processesWith(stubbornLog).length === 0, 5000, "stubborn agent to be killed");
    assert.ok(Date.now() - started >= 550, "stdin close and SIGTERM each got their grace period first");
  });

  it("an idle connection without a reader expires; the process is gone; the id answers 410 idle", async () => {
    const conn = await RawConnection.open(server, "idle");
    const sse = await conn.openSse();
    const sessionId = await conn.newSession(sse);
    sse.close();
    // A request still pending when the connection expires gets an error saying so.
    const promptId = await conn.send("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "hang" }],
    });
    await waitFor(() => processesWith(idleLog).length === 0, 8000, "idle agent to be stopped");
    const later = await conn.post({ jsonrpc: "2.0", method: "_x" });
    assert.equal(later.status, 410);
    assert.equal(((await later.json()) as { reason: string }).reason, "idle");
    const resumed = await conn.openSse();
    const error = await resumed.waitFor((m) => m.id === promptId);
    assert.equal(error.error?.data?.reason, "idle");
    assert.equal(error.error?.data?.idleMs, 1500);
    await resumed.done;
  });

  it("a crash mid-turn answers the pending prompt with -32603 (exit code, stderr), then session/ended, then the stream ends", async () => {
    const { conn, sse, sessionId } = await openSession(server);
    const promptId = await conn.send("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "echo before\nstderr 100\ncrash 7" }],
    });
    await sse.done;
    const messages = sse.messages();
    const error = messages.find((m) => m.id === promptId)!;
    assert.equal(error.error?.code, -32603);
    assert.equal(error.error?.data?.exitCode, 7);
    assert.equal(typeof error.error?.data?.stderrTail, "string");
    const ended = messages.find((m) => m.method === "_sandboxagent/session/ended")!;
    assert.equal(ended.params?.sessionId, sessionId);
    assert.ok(messages.indexOf(error) < messages.indexOf(ended));
    assert.match(agentText(messages, sessionId), /before/);
    const later = await conn.post({ jsonrpc: "2.0", method: "_x" });
    assert.ok([404, 410].includes(later.status));
    const reconnect = await conn.get({ "last-event-id": sse.lastId()! });
    assert.equal(reconnect.status, 410, "nothing left to replay: the reconnect says the agent is gone");
    const body = (await reconnect.json()) as { exit: { code: number } };
    assert.equal(body.exit.code, 7);
  });

  it("a non-JSON stdout line is dropped (reported as agent/unparsed); the connection survives", async () => {
    const { conn, sse, sessionId } = await openSession(server);
    const done = await conn.prompt(sse, sessionId, "garbage this is not json\necho after");
    assert.equal(done.result?.stopReason, "end_turn");
    const unparsed = sse.messages().find((m) => m.method === "_sandboxagent/agent/unparsed");
    assert.match(String(unparsed?.params?.line), /this is not json/);
    assert.match(agentText(sse.messages(), sessionId), /after/);
    sse.close();
  });

  it("10 MB of stderr does not block the agent", async () => {
    const { conn, sse, sessionId } = await openSession(server);
    const done = await conn.prompt(sse, sessionId, "stderr 10000000\necho survived", 20_000);
    assert.equal(done.result?.stopReason, "end_turn");
    assert.match(agentText(sse.messages(), sessionId), /survived/);
    sse.close();
  });
});

describe("idle expiry counts from initialize", () => {
  it("an agent slower to start than idleMs is not expired the moment its initialize is answered", async () => {
    const server = await startServer({
      config: {
        // Starts 5 s late; its initialize waits in the pipe meanwhile.
        agents: {
          slowstart: {
            command: "sh",
            args: ["-c", 'sleep 5; exec "$0" "$@"', process.execPath, mockAgentBin],
          },
        },
        limits: { idleMs: 4000, initializeTimeoutMs: 30_000 },
      },
    });
    try {
      const conn = await RawConnection.open(server, "slowstart");
      // Past the expiry sweep's period (idleMs / 4), well short of idleMs since the answer.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const sse = await conn.openSse();
      assert.ok(await conn.newSession(sse));
      sse.close();
    } finally {
      await server.stop();
    }
  });
});
