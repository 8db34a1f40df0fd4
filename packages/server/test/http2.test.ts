import assert from "node:assert/strict";
import {
  connect as connectH2,
  constants,
  type ClientHttp2Session,
  type ClientHttp2Stream,
  type IncomingHttpHeaders,
} from "node:http2";
import { connect as connectTcp } from "node:net";
import { Readable } from "node:stream";
import { after, before, describe, it } from "node:test";
import { readSse, startServer, waitFor, type RunningServer, type SseEvent } from "@sandbox-agent/testkit";
import { DEFAULT_LIMITS } from "../src/runtime/options.js";
import type { RpcMessage } from "./support/rpc.js";

const TIMEOUT_MS = 10_000;

interface H2Response {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** One complete request/response over an existing HTTP/2 session. */
function h2Request(
  session: ClientHttp2Session,
  headers: Record<string, string>,
  body?: string,
): Promise<H2Response> {
  return new Promise((resolve, reject) => {
    const stream = session.request(headers);
    stream.setTimeout(TIMEOUT_MS, () => stream.close());
    let text = "";
    let head: IncomingHttpHeaders = {};
    stream.setEncoding("utf8");
    stream.on("response", (h) => (head = h));
    stream.on("data", (chunk: string) => (text += chunk));
    stream.on("end", () => resolve({ status: Number(head[":status"]), headers: head, body: text }));
    stream.on("error", reject);
    stream.end(body);
  });
}

/** An SSE GET over HTTP/2 that collects events in the background. */
class H2Sse {
  readonly events: SseEvent[] = [];
  /** How the stream ended: cleanly, or cut. */
  readonly done: Promise<"end" | "error">;

  private constructor(
    readonly headers: IncomingHttpHeaders,
    private readonly stream: ClientHttp2Stream,
  ) {
    this.done = (async () => {
      for await (const event of readSse(Readable.toWeb(stream) as ReadableStream<Uint8Array>))
        this.events.push(event);
      return "end" as const;
    })().catch(() => "error" as const);
  }

  static open(session: ClientHttp2Session, headers: Record<string, string>): Promise<H2Sse> {
    return new Promise((resolve, reject) => {
      const stream = session.request({
        ":method": "GET",
        ":path": "/v2/rpc",
        accept: "text/event-stream",
        ...headers,
      });
      stream.once("response", (h) => resolve(new H2Sse(h, stream)));
      stream.once("error", reject);
    });
  }

  /** Cancels the stream (RST_STREAM), as a client that goes away would. */
  close(): void {
    this.stream.close(constants.NGHTTP2_CANCEL);
  }

  messages(): RpcMessage[] {
    return this.events
      .filter((e) => e.event !== "comment" && e.event !== "retry" && e.data !== "")
      .map((e) => JSON.parse(e.data) as RpcMessage);
  }

  async waitFor(predicate: (m: RpcMessage) => boolean): Promise<RpcMessage> {
    const deadline = Date.now() + TIMEOUT_MS;
    for (;;) {
      const found = this.messages().find(predicate);
      if (found) return found;
      if (Date.now() > deadline)
        throw new Error(`timed out; got ${JSON.stringify(this.messages()).slice(0, 1000)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

/** Writes raw bytes in pieces and returns the first bytes the server answers with. */
function rawExchange(port: number, pieces: Buffer[]): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = connectTcp(port, "127.0.0.1");
    socket.setTimeout(TIMEOUT_MS, () => socket.destroy(new Error("no answer")));
    socket.once("error", reject);
    socket.once("data", (data: Buffer) => {
      socket.destroy();
      resolve(data);
    });
    socket.once("connect", async () => {
      for (const piece of pieces) {
        socket.write(piece);
        await new Promise((r) => setTimeout(r, 50));
      }
    });
  });
}

const json = { "content-type": "application/json" };
const rpc = (id: number, method: string, params: Record<string, unknown>) =>
  JSON.stringify({ jsonrpc: "2.0", id, method, params });

describe("HTTP/2 cleartext with prior knowledge on the HTTP/1.1 port", () => {
  let server: RunningServer;
  let session: ClientHttp2Session;

  before(async () => {
    server = await startServer();
    session = connectH2(server.baseUrl);
    await new Promise<void>((resolve, reject) => {
      session.once("connect", () => resolve());
      session.once("error", reject);
    });
  });
  after(async () => {
    session.destroy();
    await server.stop();
  });

  it("serves the transport over h2: initialize, SSE without Connection header, ordered prompt, DELETE", async () => {
    const health = await h2Request(session, { ":method": "GET", ":path": "/v2/health" });
    assert.equal(health.status, 200);

    const init = await h2Request(
      session,
      { ":method": "POST", ":path": "/v2/rpc", ...json },
      rpc(0, "initialize", {
        protocolVersion: 1,
        clientCapabilities: {},
        _meta: { "sandboxagent.dev": { agent: "mock" } },
      }),
    );
    assert.equal(init.status, 200, init.body);
    const connectionId = init.headers["acp-connection-id"];
    assert.equal(typeof connectionId, "string");
    assert.equal((JSON.parse(init.body) as RpcMessage).result?.protocolVersion, 1);
    const conn = { "acp-connection-id": String(connectionId) };

    const sse = await H2Sse.open(session, conn);
    assert.equal(sse.headers[":status"], 200);
    assert.equal(sse.headers["content-type"], "text/event-stream");
    assert.equal(sse.headers.connection, undefined);

    const post = (id: number, method: string, params: Record<string, unknown>) =>
      h2Request(
        session,
        { ":method": "POST", ":path": "/v2/rpc", ...json, ...conn },
        rpc(id, method, params),
      );
    assert.equal((await post(1, "session/new", { cwd: process.cwd(), mcpServers: [] })).status, 202);
    const sessionId = (await sse.waitFor((m) => m.id === 1)).result!.sessionId!;
    const prompt = [{ type: "text", text: "chunks 500" }];
    assert.equal((await post(2, "session/prompt", { sessionId, prompt })).status, 202);

    // Plain HTTP/1.1 on the same port while the h2 stream is busy.
    const http1 = await fetch(`${server.baseUrl}/v2/health`);
    assert.equal(http1.status, 200);

    const response = await sse.waitFor((m) => m.id === 2);
    assert.equal(response.result?.stopReason, "end_turn");
    const primed = sse.events.find((e) => e.event !== "retry");
    assert.equal(primed?.data, "");
    assert.match(primed?.id ?? "", /^[0-9a-f]{8}\.0$/);
    const messages = sse.messages();
    const texts = messages
      .filter((m) => m.method === "session/update")
      .map((m) => (m.params!.update as { content: { text: string } }).content.text);
    assert.deepEqual(
      texts,
      Array.from({ length: 500 }, (_, i) => `chunk ${i + 1} `),
    );
    assert.equal(messages.at(-1)?.id, 2, "the response comes after every update");

    // A cancelled h2 stream detaches: a new GET without Last-Event-ID is not a conflicting second stream.
    sse.close();
    await sse.done;
    const again = await H2Sse.open(session, conn);
    assert.equal(again.headers[":status"], 200);

    const deleted = await h2Request(session, { ":method": "DELETE", ":path": "/v2/rpc", ...conn });
    assert.equal(deleted.status, 202);
    assert.equal(await again.done, "end");
  });

  it("answers errors as problem+json over h2 and rejects a Host that differs from :authority", async () => {
    const missing = await h2Request(session, { ":method": "GET", ":path": "/v2/nope" });
    assert.equal(missing.status, 404);
    assert.equal(missing.headers["content-type"], "application/problem+json");
    const mismatch = await h2Request(session, {
      ":method": "GET",
      ":path": "/v2/health",
      ":authority": new URL(server.baseUrl).host,
      host: "evil.example",
    });
    assert.equal(mismatch.status, 400);
  });

  it("a stream past the per-socket cap gets a 503 problem saying to retry or open another connection", async () => {
    await assertStreamCap(server.baseUrl, DEFAULT_LIMITS.maxStreamsPerSocket, session);
  });

  it("takes the per-socket cap from limits.maxStreamsPerSocket", async () => {
    const own = await startServer({ config: { limits: { maxStreamsPerSocket: 4 } } });
    const other = connectH2(own.baseUrl);
    other.on("error", () => undefined);
    try {
      await assertStreamCap(own.baseUrl, 4, other);
    } finally {
      other.destroy();
      await own.stop();
    }
  });

  it("tells the protocols apart when the first bytes arrive split", async () => {
    const preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    const emptySettings = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);
    const h2 = await rawExchange(server.port, [
      preface.subarray(0, 5),
      Buffer.concat([preface.subarray(5), emptySettings]),
    ]);
    assert.equal(h2[3], 4, "the server's first frame is SETTINGS");
    // "P" could start the preface; "PO" cannot.
    const request =
      "OST /v2/health HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
    const h1 = await rawExchange(server.port, [Buffer.from("P"), Buffer.from(request)]);
    assert.match(h1.toString("latin1"), /^HTTP\/1\.1 405 /);
  });

  it("shuts down promptly with an h2 SSE stream and a silent socket open", async () => {
    const own = await startServer();
    const client = connectH2(own.baseUrl);
    const silent = connectTcp(own.port, "127.0.0.1");
    silent.on("error", () => undefined);
    try {
      const init = await h2Request(
        client,
        { ":method": "POST", ":path": "/v2/rpc", ...json },
        rpc(0, "initialize", {
          protocolVersion: 1,
          clientCapabilities: {},
          _meta: { "sandboxagent.dev": { agent: "mock" } },
        }),
      );
      const sse = await H2Sse.open(client, {
        "acp-connection-id": String(init.headers["acp-connection-id"]),
      });
      assert.equal(sse.headers[":status"], 200);
      const closed = Promise.all([
        new Promise((resolve) => client.once("close", resolve)),
        new Promise((resolve) => silent.once("close", resolve)),
      ]);
      await own.stop();
      // testkit escalates to SIGKILL after 3 s; a clean exit means close() waited on neither.
      assert.equal(own.process.signalCode, null);
      assert.equal(own.process.exitCode, 0);
      await closed;
    } finally {
      silent.destroy();
      client.destroy();
      await own.stop();
    }
  });
});

/**
 * Holds `limit` streams open on a fresh session to `baseUrl` (requests whose bodies never come),
 * then checks the next stream gets the 503 problem, that `other` is served meanwhile, and that the
 * session is served again once one held stream ended.
 */
async function assertStreamCap(baseUrl: string, limit: number, other: ClientHttp2Session): Promise<void> {
  const own = connectH2(baseUrl);
  own.on("error", () => undefined);
  try {
    const held = Array.from({ length: limit }, () => {
      const stream = own.request({ ":method": "POST", ":path": "/v2/rpc", ...json, "content-length": "100" });
      stream.on("error", () => undefined);
      stream.write("{");
      return stream;
    });
    // Frames of one session arrive in order: the server has seen every held stream before this one.
    const refused = await h2Request(own, { ":method": "GET", ":path": "/v2/health" });
    assert.equal(refused.status, 503, refused.body);
    assert.equal(refused.headers["content-type"], "application/problem+json");
    assert.equal(refused.headers["retry-after"], "1");
    const problem = JSON.parse(refused.body) as { status: number; detail: string; limit: number };
    assert.equal(problem.status, 503);
    assert.equal(problem.limit, limit);
    assert.match(problem.detail, /retry once one of them has ended, or open another connection/);
    assert.equal((await h2Request(other, { ":method": "GET", ":path": "/v2/health" })).status, 200);
    held[0]!.close(constants.NGHTTP2_CANCEL);
    await waitFor(
      async () => (await h2Request(own, { ":method": "GET", ":path": "/v2/health" })).status === 200,
      TIMEOUT_MS,
      "a stream served after one ended",
    );
  } finally {
    own.destroy();
  }
}
