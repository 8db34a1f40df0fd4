import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { SessionNotification } from "@agentclientprotocol/sdk";
import { startProxy, startServer, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { WebSocket } from "ws";
import { AcpHttpClient, type AcpEnvelope, type WebSocketConstructor } from "../src/index.js";
import { initParams, text } from "./helpers.js";

const TOKEN = "ws-client-token";

describe("AcpHttpClient over a WebSocket (transport: websocket) ↔ our server", { timeout: 120_000 }, () => {
  let server: RunningServer;
  const clients: AcpHttpClient[] = [];
  before(async () => void (server = await startServer({ token: TOKEN })));
  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await server.stop();
  });

  function connect(baseUrl: string, Socket = WebSocket as unknown as WebSocketConstructor): AcpHttpClient {
    const client = new AcpHttpClient({
      baseUrl,
      token: TOKEN,
      transport: "websocket",
      WebSocket: Socket,
      requestTimeoutMs: 30_000,
      reconnect: { initialDelayMs: 50, maxAttempts: 5 },
    });
    clients.push(client);
    return client;
  }

  function collectChunks(client: AcpHttpClient): string[] {
    const chunks: string[] = [];
    client.onNotification("session/update", (n: SessionNotification) => {
      if (n.update.sessionUpdate === "agent_message_chunk" && n.update.content.type === "text")
        chunks.push(n.update.content.text);
    });
    return chunks;
  }

  it("runs a turn with a permission round trip (the token travels as a single-use ticket)", async () => {
    const client = connect(server.baseUrl);
    await client.initialize(initParams());
    assert.ok(client.connectionId);
    client.onRequest("session/request_permission", () => ({
      outcome: { outcome: "selected" as const, optionId: "allow_once" },
    }));
    const chunks = collectChunks(client);
    const { sessionId } = await client.newSession({ cwd: "/tmp", mcpServers: [] });
    const result = await client.prompt({ sessionId, prompt: text("chunks 3\npermission go") });
    assert.equal(result.stopReason, "end_turn");
    assert.deepEqual(chunks.slice(0, 3), ["chunk 1 ", "chunk 2 ", "chunk 3 "]);
    assert.ok(chunks.includes("permission: selected allow_once"));
    await client.close();
    // A deliberate close ends the connection on the server.
    const id = client.connectionId!;
    await waitFor(async () => {
      const res = await fetch(`${server.baseUrl}/v2/rpc`, {
        method: "DELETE",
        headers: { authorization: `Bearer ${TOKEN}`, "acp-connection-id": id },
      });
      return res.status === 404;
    });
  });

  it("resumes after the socket is cut mid-turn: every update exactly once, with counted event ids", async () => {
    const proxy = await startProxy(server.port);
    try {
      const client = connect(proxy.baseUrl);
      const envelopes: AcpEnvelope[] = [];
      client.onEnvelope((e) => envelopes.push(e));
      await client.initialize(initParams());
      const chunks = collectChunks(client);
      const { sessionId } = await client.newSession({ cwd: "/tmp", mcpServers: [] });
      const COUNT = 4000;
      const turn = client.prompt({ sessionId, prompt: text(`chunks ${COUNT}`) });
      await waitFor(() => chunks.length >= 200, 20_000, "200 chunks");
      assert.ok(proxy.cutStreams() >= 1, "the socket was cut");
      assert.equal((await turn).stopReason, "end_turn");
      assert.deepEqual(
        chunks,
        Array.from({ length: COUNT }, (_, i) => `chunk ${i + 1} `),
      );
      assert.ok(proxy.gets() >= 2, "the client reconnected");
      const ids = envelopes.filter((e) => e.direction === "inbound" && e.eventId).map((e) => e.eventId!);
      assert.equal(new Set(ids).size, ids.length, "no event id twice");
    } finally {
      await proxy.stop();
    }
  });

  it("a message written while the socket is closing waits for the resume instead of being dropped", async () => {
    const sockets: WebSocket[] = [];
    class Recorded extends WebSocket {
      constructor(...args: ConstructorParameters<typeof WebSocket>) {
        super(...args);
        sockets.push(this);
      }
    }
    const client = connect(server.baseUrl, Recorded as unknown as WebSocketConstructor);
    await client.initialize(initParams());
    const chunks = collectChunks(client);
    const { sessionId } = await client.newSession({ cwd: "/tmp", mcpServers: [] });
    // A close the server answers before the client handles it (code 3000: a drop, resumed).
    sockets.at(-1)!.close(3000);
    assert.equal(sockets.at(-1)!.readyState, WebSocket.CLOSING);
    const turn = await client.prompt({ sessionId, prompt: text("chunks 3") });
    assert.equal(turn.stopReason, "end_turn");
    assert.deepEqual(chunks, ["chunk 1 ", "chunk 2 ", "chunk 3 "]);
    assert.equal(sockets.length, 2, "resumed on a new socket");
  });

  it("reports each counted event id, refuses attach, and detaches without ending the connection", async () => {
    const ids: string[] = [];
    const envelopeIds: string[] = [];
    const client = new AcpHttpClient({
      baseUrl: server.baseUrl,
      token: TOKEN,
      transport: "websocket",
      WebSocket: WebSocket as unknown as WebSocketConstructor,
      onEventId: (id) => ids.push(id),
    });
    client.onEnvelope((e) => e.direction === "inbound" && e.eventId && envelopeIds.push(e.eventId));
    await client.initialize(initParams());
    const { sessionId } = await client.newSession({ cwd: "/tmp", mcpServers: [] });
    await client.prompt({ sessionId, prompt: text("chunks 5") });
    assert.ok(ids.length >= 7, `event ids: ${ids.join(" ")}`);
    assert.deepEqual(ids, envelopeIds);
    const seqs = ids.map((id) => Number(id.split(".")[1]));
    assert.deepEqual(
      seqs,
      seqs.map((_, i) => seqs[0]! + i),
      "consecutive",
    );
    await assert.rejects(
      client.attach({ connectionId: client.connectionId!, protocolVersion: 1 }),
      /attach needs transport "http"/,
    );
    const id = client.connectionId!;
    await client.detach();
    const headers = { authorization: `Bearer ${TOKEN}` };
    // Detached is a drop, not an end: the server keeps the connection for a resume.
    await waitFor(async () => {
      const res = await fetch(`${server.baseUrl}/v2/connections/${id}`, { headers });
      const body = (await res.json()) as { attached?: boolean };
      return res.status === 200 && body.attached === false;
    });
    const deleted = await fetch(`${server.baseUrl}/v2/rpc`, {
      method: "DELETE",
      headers: { ...headers, "acp-connection-id": id },
    });
    assert.equal(deleted.status, 202, "the connection was still there to delete");
  });
});
