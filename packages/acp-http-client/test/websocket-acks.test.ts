/**
 * Messages the client wrote on a WebSocket that died under them: none lost, none twice, and a
 * request a dead server never read fails at once with an error that says so. Real server
 * processes, real sockets, the mock agent logging every line it reads (`--stdin-log`).
 */
import assert from "node:assert/strict";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import { mockAgentCommand } from "@sandbox-agent/mock-agent";
import {
  mountNamespaceMissing,
  needService,
  smallDiskWrapper,
  startProxy,
  startServer,
  tempDir,
  waitFor,
  type RunningServer,
} from "@sandbox-agent/testkit";
import { WebSocket } from "ws";
import { AcpHttpClient, type WebSocketConstructor } from "../src/index.js";
import { initParams, text } from "./helpers.js";

const TOKEN = "ws-acks-token";

/** The mock agent keeps its sessions next to its stdin log, so a restarted server loads them again. */
function serve(stdinLog: string, args: string[] = [], wrapper?: string[]): Promise<RunningServer> {
  const { command, args: agentArgs } = mockAgentCommand(["--stdin-log", stdinLog]);
  const env = { MOCK_AGENT_STATE_DIR: path.dirname(stdinLog) };
  return startServer({
    token: TOKEN,
    args,
    wrapper,
    config: { agents: { mock: { command, args: agentArgs, env } } },
  });
}

type RpcFailure = Error & {
  code?: number;
  data?: { reason?: string; reachedAgent?: boolean; error?: string };
};

/** The error `call` rejects with (it must reject). */
async function failureOf(call: Promise<unknown>): Promise<RpcFailure> {
  return call.then(
    () => assert.fail("the request resolved"),
    (error: unknown) => error as RpcFailure,
  );
}

/** The pid of the agent of the server's only connection. */
async function agentPid(server: RunningServer): Promise<number> {
  const response = await fetch(`${server.baseUrl}/v2/connections`, {
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  const { connections } = (await response.json()) as { connections: { pid: number | null }[] };
  const pid = connections[0]?.pid;
  assert.equal(typeof pid, "number", JSON.stringify(connections));
  return pid!;
}

/**
 * Whether a connection's request journal on disk records request `id` as accepted: a `+<seq> <id>`
 * line, or a checkpoint's `=[[seq,id],…]` line naming it. An answer writes nothing there (the
 * answer's event in the log says it), so the journal alone cannot tell which requests are open.
 */
function journalRecords(dataDir: string, id: unknown): boolean {
  const key = JSON.stringify(id);
  const dir = path.join(dataDir, "event-log");
  for (const name of readdirSync(dir)) {
    let journal = "";
    try {
      journal = readFileSync(path.join(dir, name, "requests.journal"), "utf8");
    } catch {
      continue;
    }
    for (const line of journal.split("\n")) {
      if (line.startsWith("+") && line.slice(line.indexOf(" ") + 1) === key) return true;
      if (line.startsWith("=")) {
        const open = JSON.parse(line.slice(1)) as [number, unknown][];
        if (open.some(([, openId]) => JSON.stringify(openId) === key)) return true;
      }
    }
  }
  return false;
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

/** The id of the request in the frame with `marker` in it that left the client. */
function writtenId(marker: string): unknown {
  const frame = written.find((text) => text.includes(marker));
  assert.ok(frame !== undefined, `a frame with ${marker} written`);
  return (JSON.parse(frame) as { id?: unknown }).id;
}

/** Resolves once a frame containing each marker has left the client. */
function untilWritten(...markers: string[]): Promise<boolean> {
  const all = () => markers.every((marker) => written.some((text) => text.includes(marker)));
  return waitFor(all, 10_000, `frames with ${markers.join(", ")} written`);
}

function connect(baseUrl: string, transport: "websocket" | "http" = "websocket"): AcpHttpClient {
  return new AcpHttpClient({
    baseUrl,
    token: TOKEN,
    transport,
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

/** A WebSocket client with one session on a server with a data directory, which a test may SIGKILL and start again. */
interface Durable {
  stdinLog: string;
  dataDir: string;
  server: RunningServer;
  client: AcpHttpClient;
  sessionId: string;
  /** SIGKILLs the server and starts it again on the same data directory and port. */
  restart(): Promise<void>;
}

async function withDurableClient(test: (d: Durable) => Promise<void>): Promise<void> {
  const stdinLog = path.join(tempDir("ws-acks-"), "stdin.log");
  const dataDir = tempDir("ws-acks-data-");
  const server = await serve(stdinLog, ["--data-dir", dataDir]);
  const d: Durable = {
    stdinLog,
    dataDir,
    server,
    client: connect(server.baseUrl),
    sessionId: "",
    async restart() {
      const exited = new Promise((resolve) => d.server.process.once("exit", resolve));
      d.server.process.kill("SIGKILL");
      await exited;
      d.server = await serve(stdinLog, ["--data-dir", dataDir, "--port", String(server.port)]);
    },
  };
  try {
    await d.client.initialize(initParams());
    d.sessionId = (await d.client.newSession({ cwd: "/tmp", mcpServers: [] })).sessionId;
    await test(d);
  } finally {
    await d.client.close().catch(() => undefined);
    await d.server.stop();
  }
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
    await withDurableClient(async (d) => {
      const { client, sessionId, stdinLog } = d;
      await client.extNotification("_test/before", { marker: "note-before" });
      assert.equal((await client.prompt({ sessionId, prompt: text("echo before") })).stopReason, "end_turn");
      // Stopped, the server reads nothing: what the client writes now waits unread in its socket
      // buffer and dies with it, while the client still sees an open socket.
      d.server.process.kill("SIGSTOP");
      const started = Date.now();
      const unread = client.prompt({ sessionId, prompt: text("echo unread") });
      unread.catch(() => undefined);
      await client.extNotification("_test/unread", { marker: "note-unread" });
      // Both are in the stopped server's socket buffer, unread, when it dies.
      await untilWritten("echo unread", "note-unread");
      await d.restart();
      const error = await failureOf(unread);
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
    });
  });

  it("a server-answered method (set_metadata) in flight when the server is SIGKILLed: recorded before it acted, the restarted server answers it", async () => {
    await withDurableClient(async (d) => {
      const { client, sessionId } = d;
      // A stopped agent never answers the mode switch: the server's own method stays in flight.
      const agent = await agentPid(d.server);
      process.kill(agent, "SIGSTOP");
      const setMetadata = failureOf(
        client.extMethod("_sandboxagent/session/set_metadata", { sessionId, metadata: { mode: "plan" } }),
      );
      await untilWritten("set_metadata");
      const id = writtenId("set_metadata");
      await waitFor(() => journalRecords(d.dataDir, id), 10_000, "the method recorded in flight");
      await d.restart();
      process.kill(agent, "SIGKILL");
      const error = await setMetadata;
      // The server's answer (it read the request and may have acted), not the client's "never read".
      assert.equal(error.data?.reason, "server_restarted");
      assert.notEqual(error.data?.reachedAgent, false);
      assert.match(error.message, /in flight/);
      // Repeating it is harmless (a merge): the connection goes on with a new agent.
      const again = (await client.extMethod("_sandboxagent/session/set_metadata", {
        sessionId,
        metadata: { mode: "plan" },
      })) as { _meta?: Record<string, { mode?: unknown }> };
      assert.equal(again._meta?.["sandboxagent.dev"]?.mode, "plan");
    });
  });

  // Over HTTP the refusal is the POST's 503 problem, whose members the client lifts into the error's data.
  for (const transport of ["websocket", "http"] as const)
    it(
      `a request the server cannot record (its data directory is full) is refused, not run unrecorded: not_recorded, nothing reached the agent (${transport})`,
      { skip: needService("mount namespaces", mountNamespaceMissing()) },
      async () => {
        const stdinLog = path.join(tempDir("ws-acks-"), "stdin.log");
        const dataDir = tempDir("ws-acks-data-");
        const logDir = path.join(dataDir, "event-log");
        mkdirSync(logDir, { recursive: true });
        const server = await serve(stdinLog, ["--data-dir", dataDir], smallDiskWrapper(logDir, "1m"));
        const client = connect(server.baseUrl, transport);
        try {
          await client.initialize(initParams());
          // Filled before the connection's first request: its request journal has no page to write in.
          const filler = path.join(`/proc/${server.process.pid}/root`, logDir, "filler");
          try {
            writeFileSync(filler, Buffer.alloc(1024 * 1024));
          } catch (error) {
            assert.equal((error as NodeJS.ErrnoException).code, "ENOSPC");
          }
          // Requests until one cannot be recorded.
          const accepted: Promise<unknown>[] = [];
          let refused: Promise<RpcFailure> | undefined;
          let marker = "";
          for (let i = 1; i <= 20 && refused === undefined; i++) {
            marker = `probe-${i}-`;
            const call = client.newSession({ cwd: "/tmp", mcpServers: [], _meta: { probe: marker } });
            call.catch(() => undefined); // refused before it is awaited: not an unhandled rejection
            const failed = /cannot write the request journal/;
            await waitFor(
              () => agentRead(stdinLog, marker).length === 1 || failed.test(server.logs()),
              10_000,
              `${marker} reached the agent or refused`,
            );
            if (agentRead(stdinLog, marker).length === 1) accepted.push(call);
            else refused = failureOf(call);
          }
          assert.ok(refused, "a request was refused once the disk was full");
          // Room again: the answers held in memory are written and delivered.
          rmSync(filler);
          const error = await refused;
          assert.equal(error.data?.reason, "not_recorded");
          assert.equal(error.data?.reachedAgent, false);
          assert.match(error.data?.error ?? "", /ENOSPC/);
          assert.match(error.message, /could not record this request/);
          assert.match(error.message, /send it again/);
          await Promise.all(accepted);
          assert.equal(agentRead(stdinLog, marker).length, 0, "the refused request never reached the agent");
          // Sent again, it runs: the journal is written to again as soon as there is room.
          let ran = false;
          await waitFor(
            async () => {
              ran ||= await client
                .newSession({ cwd: "/tmp", mcpServers: [], _meta: { probe: "after-room" } })
                .then(
                  () => true,
                  (e: RpcFailure) => (e.data?.reason === "not_recorded" ? false : Promise.reject(e)),
                );
              return ran;
            },
            10_000,
            "the request sent again runs",
          );
          assert.equal(agentRead(stdinLog, "after-room").length, 1);
        } finally {
          await client.close().catch(() => undefined);
          await server.stop();
        }
      },
    );

  it("POSTs on a WebSocket's connection do not disturb its count: a socket dropped with frames in flight loses none, sends none twice", async () => {
    const stdinLog = path.join(tempDir("ws-acks-"), "stdin.log");
    const server = await serve(stdinLog);
    const relay = await startProxy(server.port);
    const client = connect(relay.baseUrl);
    const post = (marker: string) =>
      fetch(`${server.baseUrl}/v2/rpc`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${TOKEN}`,
          "content-type": "application/json",
          "acp-connection-id": client.connectionId!,
        },
        body: JSON.stringify({ jsonrpc: "2.0", method: "_test/posted", params: { marker } }),
      });
    try {
      await client.initialize(initParams());
      await client.newSession({ cwd: "/tmp", mcpServers: [] });
      for (const i of [1, 2]) assert.equal((await post(`posted-before-${i}`)).status, 202);
      await client.extNotification("_test/ws", { marker: "ws-1" });
      assert.equal(relay.blackHoleStreams(), 1, "the WebSocket goes into a black hole");
      for (const i of [2, 3]) await client.extNotification("_test/ws", { marker: `ws-${i}` });
      assert.equal((await post("posted-during")).status, 202);
      await untilWritten("ws-2", "ws-3");
      assert.equal(relay.cutStreams(), 1);
      // A round trip after the resume: everything written before it was handled.
      await client.newSession({ cwd: "/tmp", mcpServers: [] });
      for (const marker of ["ws-1", "ws-2", "ws-3", "posted-before-1", "posted-before-2", "posted-during"])
        assert.equal(agentRead(stdinLog, `"${marker}"`).length, 1, `${marker} once`);
    } finally {
      await client.close().catch(() => undefined);
      await relay.stop();
      await server.stop();
    }
  });
});
