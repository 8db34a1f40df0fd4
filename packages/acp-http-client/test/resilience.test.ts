import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { SessionNotification } from "@agentclientprotocol/sdk";
import { AcpHttpClient } from "../src/index.js";
import { startServer, waitFor } from "@sandbox-agent/testkit";
import {
  initParams,
  startOurServer,
  startProxy,
  text,
  type CuttableProxy,
  type TestServer,
} from "./helpers.js";

const UPDATES = 1000;

describe("SSE resilience (our server behind a cuttable TCP proxy)", { timeout: 300_000 }, () => {
  let server: TestServer;
  let proxy: CuttableProxy;
  let client: AcpHttpClient;
  before(async () => {
    server = await startOurServer();
    proxy = await startProxy(server.port);
    // Fast reconnects keep the test short; the server's `retry:` still sets the base delay.
    client = new AcpHttpClient({ baseUrl: proxy.baseUrl, requestTimeoutMs: 45_000 });
    await client.initialize(initParams());
  });
  after(async () => {
    await client.close();
    await proxy.stop();
    await server.stop();
  });

  it(`delivers a ${UPDATES}-update turn exactly once and in order while the SSE socket is cut repeatedly`, async () => {
    const { sessionId } = await client.newSession({ cwd: "/tmp", mcpServers: [] });
    const chunks: string[] = [];
    // The event streams are cut the moment the 200th, 400th, 600th and 800th update arrives: always
    // mid-turn, however fast or slow the machine is.
    const cutAt = new Set([200, 400, 600, 800]);
    let cuts = 0;
    client.onNotification("session/update", (n: SessionNotification) => {
      if (n.update.sessionUpdate === "agent_message_chunk" && n.update.content.type === "text")
        chunks.push(n.update.content.text);
      if (cutAt.delete(chunks.length) && proxy.cutStreams() > 0) cuts += 1;
    });
    const getsBefore = proxy.gets();
    const result = await client.prompt({ sessionId, prompt: text(`slow ${UPDATES} 3`) });
    assert.equal(result.stopReason, "end_turn");
    assert.equal(cuts, 4);
    assert.ok(proxy.gets() - getsBefore >= cuts, "every cut must be followed by a reconnect GET");
    assert.equal(chunks.length, UPDATES);
    assert.deepEqual(
      chunks,
      Array.from({ length: UPDATES }, (_, i) => `chunk ${i + 1} `),
    );
  });

  it("waits the server's retry: hint before reconnecting, in place of its own initial delay", async () => {
    const hinting = await startServer({ config: { limits: { retryMs: 1_500 } } });
    const hintedProxy = await startProxy(hinting.port);
    // Without the hint the client would wait a minute; with it, 1.5 s.
    const acp = new AcpHttpClient({
      baseUrl: hintedProxy.baseUrl,
      reconnect: { initialDelayMs: 60_000 },
      sessionStreams: false,
      requestTimeoutMs: 30_000,
    });
    try {
      await acp.initialize(initParams());
      // Its response arrives on the event stream, after the priming event that carries retry:.
      const { sessionId } = await acp.newSession({ cwd: "/tmp", mcpServers: [] });
      const cutAt = Date.now();
      assert.equal(hintedProxy.cutStreams(), 1);
      const reconnect = await waitFor(
        () => hintedProxy.requests().find((r) => r.method === "GET" && r.at > cutAt),
        20_000,
        "the reconnecting GET",
      );
      const waited = reconnect.at - cutAt;
      assert.ok(waited >= 1_400, `reconnected after ${waited} ms, before the server's retry: 1500`);
      assert.equal((await acp.prompt({ sessionId, prompt: text("echo after") })).stopReason, "end_turn");
    } finally {
      await acp.close();
      await hintedProxy.stop();
      await hinting.stop();
    }
  });

  it("recovers from a silent (half-open) SSE socket via the idle timeout and Last-Event-ID takeover", async () => {
    // Keep-alives every 100 ms make a 600 ms silence unambiguous.
    const chatty = await startServer({ config: { limits: { keepAliveMs: 100 } } });
    const frozenProxy = await startProxy(chatty.port);
    const quiet = new AcpHttpClient({
      baseUrl: frozenProxy.baseUrl,
      sseIdleTimeoutMs: 600,
      requestTimeoutMs: 30_000,
    });
    try {
      await quiet.initialize(initParams());
      const { sessionId } = await quiet.newSession({ cwd: "/tmp", mcpServers: [] });
      const chunks: string[] = [];
      quiet.onNotification("session/update", (n: SessionNotification) => {
        if (n.update.sessionUpdate === "agent_message_chunk" && n.update.content.type === "text")
          chunks.push(n.update.content.text);
      });
      const turn = quiet.prompt({ sessionId, prompt: text("slow 100 10") });
      await waitFor(() => chunks.length >= 10, 10_000, "first chunks");
      const getsBefore = frozenProxy.gets();
      assert.ok(frozenProxy.freezeStreams() > 0);
      const result = await turn;
      assert.equal(result.stopReason, "end_turn");
      assert.ok(frozenProxy.gets() > getsBefore, "the client must reconnect after the idle timeout");
      assert.deepEqual(
        chunks,
        Array.from({ length: 100 }, (_, i) => `chunk ${i + 1} `),
      );
    } finally {
      await quiet.close();
      await frozenProxy.stop();
      await chatty.stop();
    }
  });
});
