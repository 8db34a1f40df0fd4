import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { client, type SessionNotification, type Stream } from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { startServer, type RunningServer } from "@sandbox-agent/testkit";
import { WebSocket } from "ws";

const TOKEN = "interop-token";
const transports: Array<{ label: string; stream: (server: RunningServer) => Stream }> = [
  {
    label: "createHttpStream",
    stream: (server) => createHttpStream(`${server.baseUrl}/v2/rpc`, { headers: server.headers() }),
  },
  {
    label: "createWebSocketStream (a bearer token on the upgrade)",
    stream: (server) =>
      createWebSocketStream(`${server.baseUrl.replace(/^http/, "ws")}/v2/rpc`, {
        WebSocket,
        headers: server.headers(),
      }),
  },
];

describe("interop: the official ACP SDK client", () => {
  let server: RunningServer;

  before(async () => {
    server = await startServer({ token: TOKEN });
  });
  after(() => server.stop());

  for (const transport of transports)
    it(`${transport.label}: completes initialize → session/new → prompt with every update exactly once, and a permission round trip`, async () => {
      const updates: SessionNotification[] = [];
      const app = client({ name: "interop-test" })
        .onNotification("session/update", ({ params }) => {
          updates.push(params);
        })
        .onRequest("session/request_permission", () => ({
          outcome: { outcome: "selected", optionId: "allow_once" },
        }));
      const stream = transport.stream(server);
      const stopReason = await app.connectWith(stream, async (ctx) => {
        const init = await ctx.request("initialize", {
          protocolVersion: 1,
          clientCapabilities: {},
          _meta: { "sandboxagent.dev": { agent: "mock" } },
        });
        assert.equal(init.protocolVersion, 1);
        const session = await ctx.request("session/new", { cwd: process.cwd(), mcpServers: [] });
        const result = await ctx.request("session/prompt", {
          sessionId: session.sessionId,
          prompt: [{ type: "text", text: "chunks 50\npermission go" }],
        });
        return result.stopReason;
      });
      assert.equal(stopReason, "end_turn");
      const texts = updates
        .map((u) => u.update)
        .filter((u) => u.sessionUpdate === "agent_message_chunk")
        .map((u) => (u.content.type === "text" ? u.content.text : ""));
      assert.deepEqual(
        texts.slice(0, 50),
        Array.from({ length: 50 }, (_, i) => `chunk ${i + 1} `),
      );
      assert.ok(texts.some((t) => t.includes("permission: selected allow_once")));
    });
});
