import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import { fileURLToPath } from "node:url";
import type { McpServer } from "@agentclientprotocol/sdk";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { toolServer } from "./fixtures/mcp-tools.js";
import { killAll, kinds, messageTexts, startAgent } from "./helpers.js";

after(killAll);

/** Stateless streamable-HTTP MCP endpoint: a fresh server+transport per request. */
function startHttpMcp(): Promise<HttpServer> {
  const http = createServer((req, res) => {
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => void transport.close());
    void toolServer()
      .connect(transport)
      .then(() => transport.handleRequest(req, res));
  });
  return new Promise((resolve) => http.listen(0, "127.0.0.1", () => resolve(http)));
}

async function runPrompt(
  mcpServers: McpServer[],
  text: string,
): Promise<{ texts: string[]; kinds: string[] }> {
  const a = startAgent();
  try {
    await a.initialize();
    const { sessionId } = await a.agent.request("session/new", { cwd: os.tmpdir(), mcpServers });
    await a.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
    return { texts: messageTexts(a.updates, sessionId), kinds: kinds(a.updates, sessionId) };
  } finally {
    await a.stop();
  }
}

describe("mcp commands", { timeout: 300_000 }, () => {
  let http: HttpServer;
  before(async () => {
    http = await startHttpMcp();
  });
  after(() => http.close());

  it("calls a tool of an http MCP server", async () => {
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
    const result = await runPrompt(
      [{ type: "http", name: "tools", url, headers: [] }],
      'mcp add {"a": 2, "b": 40}\nmcp-list',
    );
    assert.deepEqual(result.texts, ["mcp result: 42", "mcp tools: add, shout"]);
    assert.deepEqual(result.kinds, [
      "tool_call",
      "tool_call_update",
      "agent_message_chunk",
      "agent_message_chunk",
    ]);
  });

  it("calls a tool of a stdio MCP server", async () => {
    const script = fileURLToPath(new URL("./fixtures/mcp-stdio-server.js", import.meta.url));
    const result = await runPrompt(
      [{ name: "tools", command: process.execPath, args: [script], env: [] }],
      'mcp shout {"text": "hi"}',
    );
    assert.deepEqual(result.texts, ["mcp result: HI"]);
  });

  it("reports errors as text", async () => {
    const noServer = await runPrompt([], "mcp add {}");
    assert.deepEqual(noServer.texts, ["mcp error: the session has no MCP servers"]);
    const unreachable = await runPrompt(
      [{ type: "http", name: "gone", url: "http://127.0.0.1:1/mcp", headers: [] }],
      "mcp-list",
    );
    assert.match(unreachable.texts[0] ?? "", /^mcp error: /);
  });
});
