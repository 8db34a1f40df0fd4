import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { SessionNotification } from "@agentclientprotocol/sdk";
import { waitFor } from "@sandbox-agent/testkit";
import { AcpHttpClient, AcpRpcError, type AcpEnvelope } from "../src/index.js";
import { initParams, startOurServer, startSdkServer, text, type TestServer } from "./helpers.js";

interface Target {
  label: string;
  start: () => Promise<TestServer>;
  sessionStreams: boolean;
}

// Our server delivers everything on the connection stream, so it must work without session GETs too.
const targets: Target[] = [
  { label: "our server", start: startOurServer, sessionStreams: true },
  { label: "our server (sessionStreams: false)", start: startOurServer, sessionStreams: false },
  { label: "SDK AcpServer", start: startSdkServer, sessionStreams: true },
];

for (const { label, start, sessionStreams } of targets) {
  describe(`AcpHttpClient ↔ ${label}`, { timeout: 300_000 }, () => {
    let server: TestServer;
    const clients: AcpHttpClient[] = [];
    before(async () => void (server = await start()));
    after(async () => {
      await Promise.all(clients.map((c) => c.close()));
      await server.stop();
    });

    async function connect(): Promise<AcpHttpClient> {
      const client = new AcpHttpClient({ baseUrl: server.baseUrl, requestTimeoutMs: 20_000, sessionStreams });
      clients.push(client);
      await client.initialize(initParams());
      return client;
    }

    it("runs a full streaming turn and exposes the connection", async () => {
      const client = await connect();
      assert.ok(client.connectionId);
      assert.equal(client.initializeResult?.agentInfo?.name, "sandbox-agent-mock");
      const envelopes: AcpEnvelope[] = [];
      client.onEnvelope((e) => envelopes.push(e));
      const { sessionId } = await client.newSession({ cwd: "/tmp", mcpServers: [] });
      const chunks: string[] = [];
      client.onNotification("session/update", (n: SessionNotification) => {
        if (n.update.sessionUpdate === "agent_message_chunk" && n.update.content.type === "text")
          chunks.push(n.update.content.text);
      });
      const result = await client.prompt({ sessionId, prompt: text("chunks 5") });
      assert.equal(result.stopReason, "end_turn");
      assert.deepEqual(chunks, ["chunk 1 ", "chunk 2 ", "chunk 3 ", "chunk 4 ", "chunk 5 "]);
      assert.ok(
        envelopes.some(
          (e) => e.direction === "outbound" && "method" in e.message && e.message.method === "session/prompt",
        ),
      );
    });

    it("answers a permission request through the registered handler", async () => {
      const client = await connect();
      let asked = 0;
      client.onRequest("session/request_permission", (params) => {
        asked += 1;
        const option = params.options.find((o) => o.kind === "allow_once");
        return { outcome: { outcome: "selected" as const, optionId: option!.optionId } };
      });
      const messages: string[] = [];
      client.onNotification("session/update", (n: SessionNotification) => {
        if (n.update.sessionUpdate === "agent_message_chunk" && n.update.content.type === "text")
          messages.push(n.update.content.text);
      });
      const { sessionId } = await client.newSession({ cwd: "/tmp", mcpServers: [] });
      const result = await client.prompt({ sessionId, prompt: text("permission deploy") });
      assert.equal(result.stopReason, "end_turn");
      assert.equal(asked, 1);
      assert.deepEqual(messages, ["permission: selected allow_once"]);
    });

    it("cancels a turn and answers its pending permission request with cancelled", async () => {
      const client = await connect();
      let resolveAsked!: () => void;
      const asked = new Promise<void>((r) => (resolveAsked = r));
      client.onRequest("session/request_permission", () => {
        resolveAsked();
        return new Promise<never>(() => undefined); // the user never answers
      });
      const { sessionId } = await client.newSession({ cwd: "/tmp", mcpServers: [] });
      const answers: unknown[] = [];
      client.onEnvelope(({ direction, message }) => {
        if (direction === "outbound" && "result" in message) answers.push(message.result);
      });
      const turn = client.prompt({ sessionId, prompt: text("permission; hang") });
      await asked;
      await client.cancel({ sessionId });
      assert.equal((await turn).stopReason, "cancelled");
      await waitFor(() => answers.length > 0, 5_000, "the permission answer");
      assert.deepEqual(answers, [{ outcome: { outcome: "cancelled" } }]);
    });

    it("passes extension notifications and requests through", async () => {
      const client = await connect();
      const pings: unknown[] = [];
      client.onNotification("_mock/ping", (params) => pings.push(params));
      client.onRequest("_mock/ask", (params) => ({ echoed: params }));
      const messages: string[] = [];
      client.onNotification("session/update", (n: SessionNotification) => {
        if (n.update.sessionUpdate === "agent_message_chunk" && n.update.content.type === "text")
          messages.push(n.update.content.text);
      });
      const { sessionId } = await client.newSession({ cwd: "/tmp", mcpServers: [] });
      await client.prompt({
        sessionId,
        prompt: text('ext _mock/ping {"n":1}\next-request _mock/ask {"q":2}'),
      });
      assert.deepEqual(pings, [{ n: 1 }]);
      assert.deepEqual(messages, ['ext-request result: {"echoed":{"q":2}}']);
      await client.extNotification("_mock/unknown", { x: 1 }); // agents ignore unknown notifications
      await assert.rejects(
        client.extMethod("_mock/nope", {}),
        (e: unknown) => e instanceof AcpRpcError && e.code === -32601 && e.label === "method_not_found",
      );
    });

    it("round-trips the typed session methods", async () => {
      const client = await connect();
      const { sessionId } = await client.newSession({ cwd: "/tmp", mcpServers: [] });
      await client.prompt({ sessionId, prompt: text("title typed methods") });
      const modes: string[] = [];
      client.onNotification("session/update", (n: SessionNotification) => {
        if (n.update.sessionUpdate === "current_mode_update") modes.push(n.update.currentModeId);
      });
      await client.setSessionMode({ sessionId, modeId: "plan" });
      assert.deepEqual(modes, ["plan"]);
      const config = await client.setSessionConfigOption({
        sessionId,
        configId: "model",
        value: "mock-smart",
      });
      assert.equal(config.configOptions.find((o) => o.id === "model")?.currentValue, "mock-smart");
      const listed = await client.listSessions();
      assert.ok(listed.sessions.some((x) => x.sessionId === sessionId && x.title === "typed methods"));
      const forked = await client.forkSession({ sessionId, cwd: "/tmp", mcpServers: [] });
      assert.notEqual(forked.sessionId, sessionId);
      await client.resumeSession({ sessionId: forked.sessionId, cwd: "/tmp", mcpServers: [] });
      const replayed: string[] = [];
      client.onNotification("session/update", (n: SessionNotification) => void replayed.push(n.sessionId));
      await client.loadSession({ sessionId, cwd: "/tmp", mcpServers: [] });
      assert.ok(
        replayed.length > 0 && replayed.every((id) => id === sessionId),
        "load replays history first",
      );
    });

    it("maps JSON-RPC errors to AcpRpcError", async () => {
      const client = await connect();
      const { sessionId } = await client.newSession({ cwd: "/tmp", mcpServers: [] });
      await assert.rejects(client.prompt({ sessionId, prompt: text("error -32002 nope") }), (e: unknown) => {
        assert.ok(e instanceof AcpRpcError);
        assert.equal(e.code, -32002);
        assert.equal(e.label, "resource_not_found");
        assert.equal(e.method, "session/prompt");
        return true;
      });
    });
  });
}
