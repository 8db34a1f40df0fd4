/**
 * Messages the client wrote on a WebSocket that died under them: none lost, none twice, and a
 * request a dead server never read fails at once with an error that says so. Real server
 * processes, real sockets, the mock agent logging every line it reads (`--stdin-log`).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import { mockAgentCommand } from "@sandbox-agent/mock-agent";
import { startProxy, startServer, tempDir, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { WebSocket } from "ws";
import { AcpHttpClient, type WebSocketConstructor } from "../src/index.js";
import { initParams, text } from "./helpers.js";

const TOKEN = "ws-acks-token";

/** The mock agent keeps its sessions next to its stdin log, so a restarted server loads them again. */
function serve(stdinLog: string, args: string[] = []): Promise<RunningServer> {
  const { command, args: agentArgs } = mockAgentCommand(["--stdin-log", stdinLog]);
  const env = { MOCK_AGENT_STATE_DIR: path.dirname(stdinLog) };
  return startServer({ token: TOKEN, args, config: { agents: { mock: { command, args: agentArgs, env } } } });
}

/** Texts whose bytes `ws` has handed to the kernel (its send callback), on any socket. */
const written: string[] = [];

/** `ws` recording what it wrote, so a test waits until a frame has left the client. */
class RecordingWebSocket extends WebSocket {
  override send(data: string): void {
    super.send(data, (error) => {
      if (!error) written.push(data);
    });
  }
}

/** Resolves once a frame containing each marker has left the client. */
function untilWritten(...markers: string[]): Promise<boolean> {
  const all = () => markers.every((marker) => written.some((text) => text.includes(marker)));
  return waitFor(all, 10_000, `frames with ${markers.join(", ")} written`);
}

function connect(baseUrl: string): AcpHttpClient {
  return new AcpHttpClient({
    baseUrl,
    token: TOKEN,
    transport: "websocket",
    WebSocket: RecordingWebSocket as unknown as WebSocketConstructor,
    requestTimeoutMs: 60_000,
    reconnect: { initialDelayMs: 50, maxDelayMs: 200, maxAttempts: 100 },
  });
}

/** The lines the agent read with `marker` in them. */
function agentRead(stdinLog: string, marker: string): string[] {
  let log = "";
  try {
    log = readFileSync(stdinLog, "utf8");
  } catch {
    return [];
  }
  return log.split("\n").filter((line) => line.includes(marker));
}

describe("WebSocket acknowledgements: messages written as the socket dies", { timeout: 120_000 }, () => {
  it("a socket dropped with messages in flight: every request and notification reaches the agent exactly once", async () => {
    const stdinLog = path.join(tempDir("ws-acks-"), "stdin.log");
    const server = await serve(stdinLog);
    const relay = await startProxy(server.port);
    const client = connect(relay.baseUrl);
    try {
      await client.initialize(initParams());
      // One session per prompt: a session runs one prompt at a time.
      const sessions = await Promise.all(
        [1, 2, 3].map(() => client.newSession({ cwd: "/tmp", mcpServers: [] })),
      );
      const sessionId = sessions[0]!.sessionId;
      assert.equal(relay.blackHoleStreams(), 1, "the WebSocket goes into a black hole");
      const turns = sessions.map(({ sessionId: id }, i) =>
        client.prompt({ sessionId: id, prompt: text(`echo lost-prompt-${i + 1}`) }),
      );
      for (const i of [1, 2, 3]) await client.extNotification("_test/lost", { marker: `lost-note-${i}` });
      // The swallowed frames have left the client before the connection dies.
      await untilWritten(
        ...[1, 2, 3].map((i) => `lost-prompt-${i}`),
        ...[1, 2, 3].map((i) => `lost-note-${i}`),
      );
      assert.equal(relay.cutStreams(), 1);
      const started = Date.now();
      for (const turn of turns) assert.equal((await turn).stopReason, "end_turn");
      assert.ok(Date.now() - started < 30_000, "answered after the resume, not at requestTimeoutMs");
      // One more round trip: every message written before it was handled, in order.
      assert.equal((await client.prompt({ sessionId, prompt: text("echo after") })).stopReason, "end_turn");
      for (const i of [1, 2, 3]) {
        assert.equal(agentRead(stdinLog, `lost-prompt-${i}`).length, 1, `prompt ${i} once`);
        assert.equal(agentRead(stdinLog, `lost-note-${i}"`).length, 1, `notification ${i} once`);
      }
      const order = agentRead(stdinLog, "lost-").map((line) => /lost-(prompt|note)-\d/.exec(line)![0]);
      // In the order they were written.
      assert.deepEqual(
        order,
        [1, 2, 3].map((i) => `lost-prompt-${i}`).concat([1, 2, 3].map((i) => `lost-note-${i}`)),
      );
    } finally {
      await client.close().catch(() => undefined);
      await relay.stop();
      await server.stop();
    }
  });

  it("a server SIGKILLed with a request written after its death: the request fails at once, saying so; a notification is not sent twice", async () => {
    const stdinLog = path.join(tempDir("ws-acks-"), "stdin.log");
    const dataDir = tempDir("ws-acks-data-");
    let server = await serve(stdinLog, ["--data-dir", dataDir]);
    const port = server.port;
    const client = connect(server.baseUrl);
    try {
      await client.initialize(initParams());
      const { sessionId } = await client.newSession({ cwd: "/tmp", mcpServers: [] });
      await client.extNotification("_test/before", { marker: "note-before" });
      assert.equal((await client.prompt({ sessionId, prompt: text("echo before") })).stopReason, "end_turn");
      // Stopped, the server reads nothing: what the client writes now waits unread in its socket
      // buffer and dies with it, while the client still sees an open socket.
      server.process.kill("SIGSTOP");
      const started = Date.now();
      const unread = client.prompt({ sessionId, prompt: text("echo unread") });
      unread.catch(() => undefined);
      await client.extNotification("_test/unread", { marker: "note-unread" });
      // Both are in the stopped server's socket buffer, unread, when it dies.
      await untilWritten("echo unread", "note-unread");
      const exited = new Promise((resolve) => server.process.once("exit", resolve));
      server.process.kill("SIGKILL");
      await exited;
      server = await serve(stdinLog, ["--data-dir", dataDir, "--port", String(port)]);
      const error = await unread.then(
        () => assert.fail("the unread request resolved"),
        (e: unknown) => e as Error & { data?: { reason?: string; reachedAgent?: boolean } },
      );
      assert.match(error.message, /restarted before this request reached the agent/);
      assert.match(error.message, /safe to send it again/);
      assert.equal(error.data?.reason, "server_restarted");
      assert.equal(error.data?.reachedAgent, false);
      assert.ok(
        Date.now() - started < 30_000,
        `failed promptly (${Date.now() - started} ms), not at requestTimeoutMs`,
      );
      // The connection goes on with a new agent; nothing of the dead process is sent twice.
      assert.equal((await client.prompt({ sessionId, prompt: text("echo again") })).stopReason, "end_turn");
      await waitFor(() => agentRead(stdinLog, "echo again").length === 1, 10_000, "the new turn read");
      assert.equal(agentRead(stdinLog, "note-before").length, 1, "a notification the dead server read, once");
      assert.equal(agentRead(stdinLog, "echo unread").length, 0, "the unread request never reached an agent");
      assert.equal(
        agentRead(stdinLog, "note-unread").length,
        0,
        "a notification of unknown fate is not sent again",
      );
    } finally {
      await client.close().catch(() => undefined);
      await server.stop();
    }
  });
});
