import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startServer, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { mockWith, stdinLog } from "./support/agents.js";
import { processesWith, rssBytes } from "./support/procs.js";
import { problemDefect, rawExchange } from "./support/raw-http.js";
import type { RpcMessage } from "./support/rpc.js";
import { openWs, refusedWs, type WsRpc } from "./support/ws-rpc.js";

const TOKEN = "ws-token";
const AUTH = { authorization: `Bearer ${TOKEN}` };
const INIT = {
  id: 0,
  method: "initialize",
  params: { protocolVersion: 1, clientCapabilities: {}, _meta: { "sandboxagent.dev": { agent: "mock" } } },
};

function chunkTexts(frames: RpcMessage[]): string[] {
  return frames
    .filter((m) => m.method === "session/update")
    .map((m) => (m.params as { update: { sessionUpdate: string; content?: { text?: string } } }).update)
    .filter((u) => u.sessionUpdate === "agent_message_chunk")
    .map((u) => u.content?.text ?? "");
}

async function started(server: RunningServer): Promise<{ ws: WsRpc; sessionId: string }> {
  const ws = await openWs(server.baseUrl, { headers: AUTH });
  ws.send(INIT);
  await ws.waitFor((m) => m.id === 0);
  ws.send({ id: 1, method: "session/new", params: { cwd: process.cwd(), mcpServers: [] } });
  const session = await ws.waitFor((m) => m.id === 1);
  return { ws, sessionId: session.result!.sessionId! };
}

describe("WebSocket transport on /v2/rpc", { timeout: 60_000 }, () => {
  let server: RunningServer;

  before(async () => {
    server = await startServer({ token: TOKEN });
  });
  after(() => server.stop());

  it("names the connection in the 101 and in the initialize result; the same connection answers over HTTP", async () => {
    const { ws } = await started(server);
    const id = ws.headers["acp-connection-id"];
    assert.equal(typeof id, "string");
    const init = ws.frames.find((m) => m.id === 0)!;
    const meta = (init.result!._meta as Record<string, { connection: { id: string; eventId: string } }>)[
      "sandboxagent.dev"
    ]!;
    assert.equal(meta.connection.id, id);
    assert.match(meta.connection.eventId, /^[0-9a-f]{8}\.0$/);
    // The extensions run on it: the agent capabilities advertise them.
    const caps = init.result!.agentCapabilities as { _meta: Record<string, { extensions: unknown }> };
    assert.ok(caps._meta["sandboxagent.dev"]!.extensions);
    // A POST on the same connection is accepted (one connection, two transports).
    const post = await fetch(`${server.baseUrl}/v2/rpc`, {
      method: "POST",
      headers: { ...AUTH, "content-type": "application/json", "acp-connection-id": String(id) },
      body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "session/list", params: {} }),
    });
    assert.equal(post.status, 202);
    await ws.waitFor((m) => m.id === 7);
    ws.ws.close();
    await ws.closed;
  });

  it("resumes from the last event id after a dropped socket: every update exactly once", async () => {
    const { ws, sessionId } = await started(server);
    const id = String(ws.headers["acp-connection-id"]);
    const init = ws.frames.find((m) => m.id === 0)!;
    const start = (init.result!._meta as Record<string, { connection: { eventId: string } }>)[
      "sandboxagent.dev"
    ]!.connection.eventId;
    const [epoch, first] = start.split(".") as [string, string];
    const COUNT = 3000;
    // Drop the socket without a close frame (a network cut) at the 100th chunk, mid-turn: the
    // connection waits for a resume.
    let chunks = 0;
    ws.cutAfter((m) => chunkTexts([m]).length === 1 && ++chunks === 100);
    ws.send({
      id: 2,
      method: "session/prompt",
      params: { sessionId, prompt: [{ type: "text", text: `chunks ${COUNT}` }] },
    });
    await waitFor(() => chunkTexts(ws.frames).length >= 100, 15_000, "100 chunks");
    await ws.closed;
    const before = ws.frames.slice(1); // frames after the initialize response are events
    assert.ok(!before.some((m) => m.id === 2), "the cut came after the turn's end: nothing to resume");
    const lastEventId = `${epoch}.${Number(first) + before.length}`;
    const resumed = await openWs(server.baseUrl, { headers: AUTH, query: { connectionId: id, lastEventId } });
    await resumed.waitFor((m) => m.id === 2, 30_000);
    const texts = chunkTexts([...before, ...resumed.frames]);
    assert.deepEqual(
      texts,
      Array.from({ length: COUNT }, (_, i) => `chunk ${i + 1} `),
    );
    resumed.ws.close();
    await resumed.closed;
  });

  it("a resume with ?acks=1 starts with how many client messages this process handled and the log's head (no event); without it, no such frame", async () => {
    const { ws, sessionId } = await started(server);
    const id = String(ws.headers["acp-connection-id"]);
    const init = ws.frames.find((m) => m.id === 0)!;
    const meta = (init.result!._meta as Record<string, { connection: { eventId: string; acks: boolean } }>)[
      "sandboxagent.dev"
    ]!.connection;
    assert.equal(meta.acks, true);
    const [epoch, first] = meta.eventId.split(".") as [string, string];
    // Messages after the initialize: session/new (above), a notification, a request.
    ws.send({ method: "session/cancel", params: { sessionId } });
    ws.send({
      id: 2,
      method: "session/prompt",
      params: { sessionId, prompt: [{ type: "text", text: "echo hi" }] },
    });
    await ws.waitFor((m) => m.id === 2);
    ws.ws.terminate();
    await ws.closed;
    const lastEventId = `${epoch}.${Number(first) + ws.frames.length - 1}`;
    const plain = await openWs(server.baseUrl, { headers: AUTH, query: { connectionId: id, lastEventId } });
    plain.send({ id: 3, method: "session/list", params: {} });
    await plain.waitFor((m) => m.id === 3);
    assert.ok(!plain.frames.some((m) => m.method === "_sandboxagent/transport/resumed"));
    const acked = await openWs(server.baseUrl, {
      headers: AUTH,
      query: { connectionId: id, lastEventId, acks: "1" },
    });
    await acked.waitFor((m) => m.id === 3);
    const [resumed, ...events] = acked.frames;
    assert.equal(resumed!.method, "_sandboxagent/transport/resumed");
    // session/new, session/cancel, session/prompt, session/list: counted across sockets.
    assert.equal((resumed!.params as { received: number }).received, 4);
    const head = (resumed!.params as { head: string }).head;
    assert.equal(head, `${epoch}.${Number(first) + ws.frames.length - 1 + events.length}`);
    acked.ws.close();
    await acked.closed;
  });

  it("a deliberate close ends the connection (as DELETE does); a resume then gets 404", async () => {
    const { ws } = await started(server);
    const id = String(ws.headers["acp-connection-id"]);
    ws.ws.close(1000);
    await ws.closed;
    await waitFor(async () => {
      const res = await fetch(`${server.baseUrl}/v2/rpc`, {
        headers: { ...AUTH, accept: "text/event-stream", "acp-connection-id": id },
      });
      await res.body?.cancel();
      return res.status === 404;
    });
    const refused = await refusedWs(server.baseUrl, { headers: { ...AUTH, "acp-connection-id": id } });
    assert.equal(refused.status, 404);
  });

  it("checks the token, Origin and tickets on the upgrade; a token in the URL is not accepted", async () => {
    assert.equal((await refusedWs(server.baseUrl)).status, 401);
    assert.equal((await refusedWs(server.baseUrl, { query: { token: TOKEN } })).status, 401);
    const foreign = await refusedWs(server.baseUrl, { headers: { ...AUTH, origin: "https://evil.example" } });
    assert.equal(foreign.status, 403);
    assert.match(foreign.body, /allow-origin/);
    const issue = async () => {
      const res = await fetch(`${server.baseUrl}/v2/rpc/ticket`, { method: "POST", headers: AUTH });
      assert.equal(res.status, 201);
      return ((await res.json()) as { ticket: string }).ticket;
    };
    assert.equal((await fetch(`${server.baseUrl}/v2/rpc/ticket`, { method: "POST" })).status, 401);
    const ticket = await issue();
    const ws = await openWs(server.baseUrl, { query: { ticket } });
    ws.send(INIT);
    await ws.waitFor((m) => m.id === 0);
    ws.ws.close();
    assert.equal((await refusedWs(server.baseUrl, { query: { ticket } })).status, 401, "a ticket works once");
  });

  it("a malformed or non-WebSocket upgrade gets a problem+json answer, not the WebSocket library's HTML", async () => {
    const KEY = "dGhlIHNhbXBsZSBub25jZQ==";
    const upgrade = (headers: string) =>
      `GET /v2/rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: Upgrade\r\n${headers}\r\n`;
    const cases: Array<[string, string, number]> = [
      ["Upgrade: h2c", "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n", 400],
      ["no Sec-WebSocket-Key", "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n", 400],
      [
        "an old version",
        `Upgrade: websocket\r\nSec-WebSocket-Key: ${KEY}\r\nSec-WebSocket-Version: 7\r\n`,
        426,
      ],
    ];
    for (const [name, headers, status] of cases) {
      const [response] = await rawExchange(server.port, upgrade(headers), { timeoutMs: 5000 });
      assert.ok(response, `${name}: no answer`);
      assert.equal(response.status, status, name);
      const defect = problemDefect(
        response.status,
        response.headers.get("content-type"),
        response.body,
        response.complete,
      );
      assert.equal(defect, undefined, name);
    }
  });

  it("answers bad frames with JSON-RPC errors and requires initialize first", async () => {
    const early = await openWs(server.baseUrl, { headers: AUTH });
    early.send({ id: 1, method: "session/new", params: {} });
    assert.equal((await early.closed).code, 1008);

    const { ws } = await started(server);
    ws.ws.send("{not json");
    const parse = await ws.waitFor((m) => m.error?.code === -32700);
    assert.equal(parse.id, null);
    ws.ws.send("[1,2]");
    await ws.waitFor((m) => m.error?.code === -32600 && /batches/.test(m.error.message));
    ws.send({ ...INIT, id: 9 });
    const again = await ws.waitFor((m) => m.id === 9);
    assert.match(again.error!.message, /not allowed on an existing connection/);
    ws.ws.close();
  });

  it("initialize failures come back as a JSON-RPC error and a 4xxx close", async () => {
    const ws = await openWs(server.baseUrl, { headers: AUTH });
    ws.send({
      ...INIT,
      params: { ...INIT.params, _meta: { "sandboxagent.dev": { agent: "no-such-agent" } } },
    });
    const answer = await ws.waitFor((m) => m.id === 0);
    assert.equal(answer.error!.code, -32603);
    const status = (answer.error!.data as { status: number }).status;
    assert.ok(status >= 400);
    assert.equal((await ws.closed).code, 4000 + status);
  });
});

describe("WebSocket backpressure", { timeout: 60_000 }, () => {
  const noisyLog = stdinLog();
  let server: RunningServer;

  before(async () => {
    server = await startServer({
      config: {
        agents: { noisy: mockWith("--stdin-log", noisyLog) },
        limits: { maxBufferedBytes: 512 * 1024, replayBytes: 512 * 1024, stallMs: 1500 },
      },
    });
  });
  after(() => server.stop());

  it("a socket that reads nothing while the agent floods holds the agent back, is closed after the stall, memory bounded", async () => {
    const ws = await openWs(server.baseUrl);
    ws.send({ ...INIT, params: { ...INIT.params, _meta: { "sandboxagent.dev": { agent: "noisy" } } } });
    await ws.waitFor((m) => m.id === 0);
    ws.send({ id: 1, method: "session/new", params: { cwd: process.cwd(), mcpServers: [] } });
    const sessionId = (await ws.waitFor((m) => m.id === 1)).result!.sessionId!;
    const id = String(ws.headers["acp-connection-id"]);
    const base = rssBytes(server.process.pid!);
    ws.ws.pause();
    ws.send({
      id: 2,
      method: "session/prompt",
      params: { sessionId, prompt: [{ type: "text", text: `chunks 400000 ${"x".repeat(200)}` }] },
    });
    await waitFor(() => processesWith(noisyLog).length === 0, 20_000, "the stalled connection to be closed");
    const grown = rssBytes(server.process.pid!) - base;
    assert.ok(grown < 64 * 1024 * 1024, `server grew by ${grown} bytes for ~100 MB of agent output`);
    ws.ws.terminate();
    // The prompt's error still reaches a socket that takes the stream over.
    const taken = await openWs(server.baseUrl, { headers: { "acp-connection-id": id } });
    const error = await taken.waitFor((m) => m.id === 2, 20_000);
    assert.equal(error.error?.data?.reason, "output_stalled");
    taken.ws.terminate();
  });
});
