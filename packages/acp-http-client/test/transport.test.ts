import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  client,
  methods,
  type AnyMessage,
  type PromptResponse,
  type SessionNotification,
  type Stream,
} from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { startServer, waitFor } from "@sandbox-agent/testkit";
import {
  AcpConnectionLostError,
  AcpHttpClient,
  AcpHttpError,
  AcpRpcError,
  createAcpHttpStream,
} from "../src/index.js";
import { initParams, startOurServer, startProxy, startSdkServer, text, type TestServer } from "./helpers.js";

function chunkText(n: SessionNotification): string | undefined {
  return n.update.sessionUpdate === "agent_message_chunk" && n.update.content.type === "text"
    ? n.update.content.text
    : undefined;
}

/** One turn through the SDK's own `client()` app over `stream`; returns the streamed text and stop reason. */
async function sdkTurn(stream: Stream, script: string): Promise<{ chunks: string[]; stopReason: string }> {
  const chunks: string[] = [];
  const result = await client({ name: "interop" })
    .onNotification(
      methods.client.session.update,
      ({ params }) => void (chunkText(params) !== undefined && chunks.push(chunkText(params)!)),
    )
    .onRequest(methods.client.session.requestPermission, ({ params }) => ({
      outcome: {
        outcome: "selected" as const,
        optionId: params.options.find((o) => o.kind === "reject_once")!.optionId,
      },
    }))
    .connectWith<PromptResponse>(stream, async (agent) => {
      await agent.request(methods.agent.initialize, initParams());
      const { sessionId } = await agent.request(methods.agent.session.new, { cwd: "/tmp", mcpServers: [] });
      return agent.request(methods.agent.session.prompt, { sessionId, prompt: text(script) });
    });
  return { chunks, stopReason: result.stopReason };
}

const EXPECTED_CHUNKS = ["chunk 1 ", "chunk 2 ", "chunk 3 ", "permission: selected reject_once"];

describe("interop matrix", { timeout: 300_000 }, () => {
  let ours: TestServer;
  let sdk: TestServer;
  before(async () => void ([ours, sdk] = await Promise.all([startOurServer(), startSdkServer()])));
  after(async () => void (await Promise.all([ours.stop(), sdk.stop()])));

  it("SDK client() on createAcpHttpStream ↔ our server", async () => {
    const turn = await sdkTurn(createAcpHttpStream({ baseUrl: ours.baseUrl }), "chunks 3\npermission");
    assert.deepEqual(turn, { chunks: EXPECTED_CHUNKS, stopReason: "end_turn" });
  });

  it("SDK client() on createAcpHttpStream ↔ SDK AcpServer", async () => {
    const turn = await sdkTurn(createAcpHttpStream({ baseUrl: sdk.baseUrl }), "chunks 3\npermission");
    assert.deepEqual(turn, { chunks: EXPECTED_CHUNKS, stopReason: "end_turn" });
  });

  it("SDK createHttpStream ↔ our server", async () => {
    const turn = await sdkTurn(createHttpStream(`${ours.baseUrl}/v2/rpc`), "chunks 3\npermission");
    assert.deepEqual(turn, { chunks: EXPECTED_CHUNKS, stopReason: "end_turn" });
  });
});

describe("transport edge cases (our server)", { timeout: 300_000 }, () => {
  let server: TestServer;
  before(async () => void (server = await startOurServer()));
  after(async () => void (await server.stop()));

  it("does not lose a response that arrives on SSE before its POST's 202", async () => {
    const order: string[] = [];
    // Real HTTP, but the 202 of session/new is handed to the transport only after its response came in on SSE.
    let sawSessionResponse!: () => void;
    const responseSeen = new Promise<void>((r) => (sawSessionResponse = r));
    const delayedFetch: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (typeof init?.body === "string" && init.body.includes('"session/new"')) {
        await responseSeen;
        order.push("202");
      }
      return response;
    };
    const acp = new AcpHttpClient({ baseUrl: server.baseUrl, fetch: delayedFetch, requestTimeoutMs: 10_000 });
    acp.onEnvelope(({ direction, message }) => {
      if (
        direction === "inbound" &&
        "result" in message &&
        (message.result as { sessionId?: string } | null)?.sessionId !== undefined
      ) {
        order.push("sse-response");
        sawSessionResponse();
      }
    });
    await acp.initialize(initParams());
    const { sessionId } = await acp.newSession({ cwd: "/tmp", mcpServers: [] });
    assert.ok(sessionId);
    // newSession resolved from the SSE response alone; the delayed 202 arrives afterwards.
    await waitFor(() => order.length === 2, 5000, "the delayed 202");
    assert.deepEqual(order, ["sse-response", "202"]);
    await acp.close();
  });

  it("names the connection as Acp-Connection-Id and as x-acp-connection-id on every request after initialize", async () => {
    const proxy = await startProxy(server.port);
    try {
      const acp = new AcpHttpClient({ baseUrl: proxy.baseUrl, requestTimeoutMs: 10_000 });
      await acp.initialize(initParams());
      const id = acp.connectionId!;
      const { sessionId } = await acp.newSession({ cwd: "/tmp", mcpServers: [] });
      await acp.prompt({ sessionId, prompt: text("echo hi") });
      await acp.close();
      const [initialize, ...later] = proxy.requests();
      assert.equal(initialize?.headers["acp-connection-id"], undefined, "initialize has no connection yet");
      assert.deepEqual(
        [...new Set(later.map((r) => r.method))].sort(),
        ["DELETE", "GET", "POST"],
        "POSTs, SSE GETs and the DELETE were seen",
      );
      for (const request of later) {
        assert.equal(request.headers["acp-connection-id"], id, request.method);
        assert.equal(request.headers["x-acp-connection-id"], id, request.method);
      }
    } finally {
      await proxy.stop();
    }
  });

  it("DELETEs the connection on close()", async () => {
    const acp = new AcpHttpClient({ baseUrl: server.baseUrl });
    await acp.initialize(initParams());
    const id = acp.connectionId!;
    await acp.close();
    assert.deepEqual(await acp.closed, { kind: "closed" });
    const res = await fetch(`${server.baseUrl}/v2/rpc`, {
      headers: { Accept: "text/event-stream", "Acp-Connection-Id": id },
    });
    await res.body?.cancel();
    assert.equal(res.status, 404);
  });

  it("closes (with DELETE) when the caller's AbortSignal aborts", async () => {
    const controller = new AbortController();
    const acp = new AcpHttpClient({ baseUrl: server.baseUrl, signal: controller.signal });
    await acp.initialize(initParams());
    const id = acp.connectionId!;
    controller.abort();
    assert.deepEqual(await acp.closed, { kind: "closed" });
    const res = await fetch(`${server.baseUrl}/v2/rpc`, {
      headers: { Accept: "text/event-stream", "Acp-Connection-Id": id },
    });
    await res.body?.cancel();
    assert.equal(res.status, 404);
  });

  it("fails clearly with connection lost when the agent exits", async () => {
    const acp = new AcpHttpClient({ baseUrl: server.baseUrl, reconnect: { initialDelayMs: 50 } });
    const notifications: string[] = [];
    acp.onEnvelope(
      ({ direction, message }) =>
        void (direction === "inbound" && "method" in message && notifications.push(message.method)),
    );
    await acp.initialize(initParams());
    const { sessionId } = await acp.newSession({ cwd: "/tmp", mcpServers: [] });
    await assert.rejects(
      acp.prompt({ sessionId, prompt: text("crash 3") }),
      (e: unknown) => e instanceof AcpRpcError && e.code === -32603,
    );
    const reason = await acp.closed;
    assert.equal(reason.kind, "error");
    assert.ok(
      reason.kind === "error" && reason.error instanceof AcpConnectionLostError,
      String(reason.kind === "error" && reason.error),
    );
    assert.match(reason.error.message, /connection lost/);
    assert.ok(
      notifications.includes("_sandboxagent/session/ended"),
      "the server's ended notification passes through untouched",
    );
    await assert.rejects(acp.newSession({ cwd: "/tmp", mcpServers: [] }), AcpConnectionLostError);
  });

  it("reports a refused initialize as AcpHttpError with the problem details", async () => {
    const acp = new AcpHttpClient({ baseUrl: server.baseUrl });
    await assert.rejects(acp.initialize({ protocolVersion: 1, clientCapabilities: {} }), (e: unknown) => {
      assert.ok(e instanceof AcpHttpError, String(e));
      assert.equal(e.status, 400);
      assert.equal(e.problem?.title, "Bad Request");
      assert.match(e.problem?.detail ?? "", /_meta/);
      return true;
    });
  });

  it("sends the bearer token and extra headers", async () => {
    const guarded = await startServer({ token: "s3cret" });
    try {
      const denied = new AcpHttpClient({ baseUrl: guarded.baseUrl, token: "wrong" });
      await assert.rejects(
        denied.initialize(initParams()),
        (e: unknown) => e instanceof AcpHttpError && e.status === 401,
      );
      const seen: Record<string, string>[] = [];
      const spy: typeof fetch = (input, init) => (
        seen.push(init?.headers as Record<string, string>),
        fetch(input, init)
      );
      const ok = new AcpHttpClient({
        baseUrl: guarded.baseUrl,
        token: "s3cret",
        headers: { "X-Trace": "t1" },
        fetch: spy,
      });
      await ok.initialize(initParams());
      await ok.newSession({ cwd: "/tmp", mcpServers: [] });
      assert.ok(seen.every((h) => h.Authorization === "Bearer s3cret" && h["X-Trace"] === "t1"));
      await ok.close();
    } finally {
      await guarded.stop();
    }
  });

  it("rejects an unsupported negotiated protocol version and deletes the connection", async () => {
    const odd = await startServer({ env: { MOCK_AGENT_FLAGS: "--protocol-version 99" } });
    try {
      const deletes: string[] = [];
      const spy: typeof fetch = (input, init) => (
        init?.method === "DELETE" && deletes.push("DELETE"),
        fetch(input, init)
      );
      const acp = new AcpHttpClient({ baseUrl: odd.baseUrl, fetch: spy });
      await assert.rejects(acp.initialize(initParams()), /protocol version 99/);
      assert.equal((await acp.closed).kind, "error");
      assert.deepEqual(deletes, ["DELETE"]);
    } finally {
      await odd.stop();
    }
  });

  it("fails only the request whose POST got a non-fatal HTTP error", async () => {
    const small = await startServer({ config: { limits: { maxBodyBytes: 4096 } } });
    const acp = new AcpHttpClient({ baseUrl: small.baseUrl, requestTimeoutMs: 10_000 });
    try {
      await acp.initialize(initParams());
      const { sessionId } = await acp.newSession({ cwd: "/tmp", mcpServers: [] });
      await assert.rejects(
        acp.prompt({ sessionId, prompt: text(`echo ${"x".repeat(10_000)}`) }),
        (e: unknown) => {
          assert.ok(e instanceof AcpRpcError, String(e));
          assert.equal(e.code, -32603);
          assert.equal((e.data as { status: number }).status, 413);
          return true;
        },
      );
      const result = await acp.prompt({ sessionId, prompt: text("echo still here") });
      assert.equal(result.stopReason, "end_turn");
    } finally {
      await acp.close();
      await small.stop();
    }
  });

  it("never batches and sends one POST per message", async () => {
    const bodies: unknown[] = [];
    const spy: typeof fetch = (input, init) => {
      if (typeof init?.body === "string") bodies.push(JSON.parse(init.body));
      return fetch(input, init);
    };
    const acp = new AcpHttpClient({ baseUrl: server.baseUrl, fetch: spy });
    await acp.initialize(initParams());
    const { sessionId } = await acp.newSession({ cwd: "/tmp", mcpServers: [] });
    await Promise.all([
      acp.prompt({ sessionId, prompt: text("echo a") }),
      acp.extNotification("_x/note", {}),
    ]);
    assert.ok(
      bodies.length >= 4 && bodies.every((b) => !Array.isArray(b) && (b as AnyMessage).jsonrpc === "2.0"),
    );
    await acp.close();
  });
});
