import assert from "node:assert/strict";
import { connect as connectH2, constants } from "node:http2";
import { connect } from "node:net";
import { after, before, describe, it } from "node:test";
import { startServer, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { filteredMock, mockWith, received, stdinLog } from "./support/agents.js";
import { RawConnection, type RpcMessage, type SseReader } from "./support/rpc.js";

const META = "sandboxagent.dev";
const loggedLog = stdinLog();

/** `{"a":{"a":…}}` nested `depth` levels, as JSON text (building it as an object would not be smaller). */
function nestedJson(depth: number): string {
  return '{"a":'.repeat(depth) + "1" + "}".repeat(depth);
}

/** The mock agent, with every `session/list` entry's `_meta` nested 5,000 levels: too deep to re-serialize. */
function deepListAgent(): { command: string; args: string[] } {
  const deep = JSON.stringify(nestedJson(5000));
  return filteredMock(
    `(line) => line.replace('"sessions":[{', '"sessions":[{"_meta":{"deep":' + ${deep} + '},')`,
  );
}

async function assertAlive(server: RunningServer): Promise<void> {
  assert.equal(server.process.exitCode, null, `the server exited:\n${server.logs().slice(-2000)}`);
  assert.equal((await fetch(`${server.baseUrl}/v2/health`)).status, 200);
}

describe("no request can crash the server: metadata is bounded", () => {
  let server: RunningServer;
  let conn: RawConnection;
  let sse: SseReader;

  before(async () => {
    server = await startServer({
      config: { agents: { logged: mockWith("--stdin-log", loggedLog), deeplist: deepListAgent() } },
    });
    conn = await RawConnection.open(server, "logged");
    sse = await conn.openSse();
  });
  after(async () => {
    sse.close();
    await server.stop();
  });

  /** POSTs a request with a hand-written params text and waits for its answer on the stream. */
  async function callRaw(id: number, method: string, paramsJson: string): Promise<RpcMessage> {
    const response = await conn.post(
      `{"jsonrpc":"2.0","id":${id},"method":"${method}","params":${paramsJson}}`,
    );
    assert.equal(response.status, 202, await response.text());
    return sse.waitFor((m) => m.id === id && m.method === undefined);
  }

  // 100 levels: past the 32 metadata keeps, within the 128 any message may have (deeper bodies are
  // refused by the transport with 400 before any extension sees them; see bad-input.test.ts).
  it("set_metadata nested 100 levels deep is -32602 naming the limit; the server lives on", async () => {
    const sessionId = await conn.newSession(sse);
    for (const [id, field] of [
      [9001, "metadata"],
      [9002, "_meta"],
    ] as const) {
      const value = field === "metadata" ? nestedJson(100) : `{"${META}":${nestedJson(100)}}`;
      const answer = await callRaw(
        id,
        "_sandboxagent/session/set_metadata",
        `{"sessionId":"${sessionId}","${field}":${value}}`,
      );
      assert.equal(answer.error?.code, -32602, JSON.stringify(answer).slice(0, 500));
      assert.match(answer.error!.message, /nested deeper than 32 levels/);
      assert.deepEqual(answer.error!.data?.limits, { maxDepth: 32, maxBytes: 16384 });
    }
    await assertAlive(server);
    const fine = await conn.call(sse, "_sandboxagent/session/set_metadata", {
      sessionId,
      metadata: { variant: "x" },
    });
    const stored = (fine.result!._meta as Record<string, Record<string, unknown>>)[META]!;
    assert.equal(stored.variant, "x");
  });

  it("set_metadata over 16 KiB, at once or merged over several calls, is -32602 and stores nothing", async () => {
    const sessionId = await conn.newSession(sse);
    const big = await conn.call(sse, "_sandboxagent/session/set_metadata", {
      sessionId,
      metadata: { blob: "x".repeat(20_000) },
    });
    assert.equal(big.error?.code, -32602);
    assert.match(big.error!.message, /over 16384 bytes/);
    const half = { blob1: "y".repeat(9000) };
    assert.equal(
      (await conn.call(sse, "_sandboxagent/session/set_metadata", { sessionId, metadata: half })).error,
      undefined,
    );
    const more = await conn.call(sse, "_sandboxagent/session/set_metadata", {
      sessionId,
      metadata: { blob2: "z".repeat(9000) },
    });
    assert.equal(more.error?.code, -32602, "the merged metadata would exceed the limit");
    const listed = await conn.call(sse, "session/list", {});
    const entry = (listed.result!.sessions as Array<Record<string, unknown>>).find(
      (s) => s.sessionId === sessionId,
    )!;
    const meta = (entry._meta as Record<string, Record<string, unknown>>)[META]!;
    assert.equal(meta.blob1, half.blob1);
    assert.equal("blob2" in meta, false);
  });

  it("session/new with a deeply nested _meta is refused before it reaches the agent; session/list still answers", async () => {
    const answer = await callRaw(
      9003,
      "session/new",
      `{"cwd":${JSON.stringify(process.cwd())},"mcpServers":[],"_meta":{"${META}":${nestedJson(100)}}}`,
    );
    assert.equal(answer.error?.code, -32602);
    assert.deepEqual(answer.error!.data?.limits, { maxDepth: 32, maxBytes: 16384 });
    assert.equal(
      received(loggedLog).some((m) => m.id === 9003),
      false,
      "the refused session/new was forwarded to the agent",
    );
    const listed = await conn.call(sse, "session/list", {});
    assert.ok(Array.isArray(listed.result?.sessions));
    await assertAlive(server);
  });

  it("an agent's own session/list answer too deep to merge is delivered as the agent wrote it", async () => {
    const deep = await RawConnection.open(server, "deeplist");
    const stream = await deep.openSse();
    const sessionId = await deep.newSession(stream);
    await deep.prompt(stream, sessionId, "echo hello");
    const listed = await deep.call(stream, "session/list", {});
    const sessions = listed.result?.sessions as Array<Record<string, unknown>>;
    assert.equal(sessions[0]!.sessionId, sessionId);
    assert.match(server.logs(), /cannot be serialized again/);
    await assertAlive(server);
    stream.close();
    await deep.delete();
  });
});

describe("no client can crash the server by vanishing mid-request", () => {
  let server: RunningServer;

  before(async () => {
    server = await startServer({ config: { agents: { hang: mockWith("--hang-initialize") } } });
  });
  after(() => server.stop());

  /** Opens a raw HTTP/1.1 socket, sends `text`, waits for `until` bytes of answer (or none), then resets it. */
  function vanish(text: string, waitForAnswer: boolean): Promise<void> {
    return new Promise((resolve) => {
      const socket = connect(server.port, "127.0.0.1", () => {
        socket.write(text);
        if (!waitForAnswer) setImmediate(() => socket.resetAndDestroy());
      });
      socket.once("data", () => socket.resetAndDestroy());
      socket.once("close", () => resolve());
      socket.on("error", () => {});
    });
  }

  it("cut bodies, dropped SSE readers, reset HTTP/2 streams and abandoned initializes", async () => {
    const conn = await RawConnection.open(server);
    const init = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: 1, _meta: { [META]: { agent: "hang" } } },
    });
    const h1 = (extra: string) =>
      `Host: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n${extra}\r\n`;
    for (let round = 0; round < 10; round++) {
      await Promise.all([
        // a body cut in the middle
        vanish(`POST /v2/rpc HTTP/1.1\r\n${h1("Content-Length: 500\r\n")}${init.slice(0, 40)}`, false),
        // an initialize whose client leaves before the agent answers
        vanish(`POST /v2/rpc HTTP/1.1\r\n${h1(`Content-Length: ${init.length}\r\n`)}${init}`, false),
        // an SSE reader reset as soon as its stream starts
        vanish(`GET /v2/rpc HTTP/1.1\r\n${h1(`Acp-Connection-Id: ${conn.id}\r\n`)}`, true),
        // HTTP/2: a POST stream reset mid-body, an SSE stream and then the whole session dropped
        new Promise<void>((resolve) => {
          const session = connectH2(server.baseUrl);
          session.on("error", () => {});
          const post = session.request({
            ":method": "POST",
            ":path": "/v2/rpc",
            "content-type": "application/json",
          });
          post.on("error", () => {});
          post.write(init.slice(0, 30));
          post.close(constants.NGHTTP2_CANCEL);
          const sse = session.request({
            ":path": "/v2/rpc",
            accept: "text/event-stream",
            "acp-connection-id": conn.id,
          });
          sse.on("error", () => {});
          sse.once("response", () => {
            session.destroy();
            resolve();
          });
        }),
      ]);
    }
    await assertAlive(server);
    // Every reader above left: a new one may attach (a reader whose client vanished is detached).
    const sse = await waitFor(() => conn.openSse(null).catch(() => undefined), 5000, "the readers to detach");
    const sessionId = await conn.newSession(sse);
    assert.equal((await conn.prompt(sse, sessionId, "echo still fine")).result?.stopReason, "end_turn");
    sse.close();
  });
});
