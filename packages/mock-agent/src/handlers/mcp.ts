import type { McpServer } from "@agentclientprotocol/sdk";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { Turn } from "../turn.js";

async function transportFor(server: McpServer): Promise<Transport> {
  if ("type" in server && server.type === "http") {
    const { StreamableHTTPClientTransport } =
      await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
    const headers = Object.fromEntries(server.headers.map((h) => [h.name, h.value]));
    return new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers } });
  }
  if ("type" in server && server.type === "sse")
    throw new Error("sse MCP servers are not supported (mcpCapabilities.sse is false)");
  const stdio = server as Extract<McpServer, { command: string }>;
  const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");
  const env = {
    ...(process.env as Record<string, string>),
    ...Object.fromEntries(stdio.env.map((e) => [e.name, e.value])),
  };
  return new StdioClientTransport({ command: stdio.command, args: stdio.args, env, stderr: "ignore" });
}

/** Connects to the session's first MCP server, runs `use`, and always closes the connection. */
async function withMcpClient<T>(turn: Turn, use: (client: Client) => Promise<T>): Promise<T> {
  const server = turn.session.mcpServers[0];
  if (!server) throw new Error("the session has no MCP servers");
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
  const client = new Client({ name: "sandbox-agent-mock", version: "0.1.0" });
  await client.connect(await transportFor(server));
  try {
    return await use(client);
  } finally {
    await client.close().catch(() => undefined);
  }
}

function resultText(content: unknown): string {
  if (!Array.isArray(content)) return JSON.stringify(content ?? null);
  return content
    .map((c: { type?: string; text?: string }) => (c.type === "text" ? (c.text ?? "") : JSON.stringify(c)))
    .join("\n");
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export async function mcpCall(turn: Turn, tool: string, args: Record<string, unknown>): Promise<void> {
  const toolCallId = turn.nextToolCallId();
  await turn.emit({
    sessionUpdate: "tool_call",
    toolCallId,
    title: tool,
    kind: "other",
    status: "in_progress",
    rawInput: args,
  });
  let text: string;
  let failed: boolean;
  try {
    const result = await turn.untilCancelled(
      withMcpClient(turn, (c) => c.callTool({ name: tool, arguments: args })),
    );
    text = resultText(result.content);
    failed = result.isError === true;
  } catch (error) {
    turn.checkCancelled();
    text = errorText(error);
    failed = true;
  }
  await turn.emit({
    sessionUpdate: "tool_call_update",
    toolCallId,
    status: failed ? "failed" : "completed",
    content: [{ type: "content", content: { type: "text", text } }],
    rawOutput: { text },
  });
  await turn.message(failed ? `mcp error: ${text}` : `mcp result: ${text}`);
}

export async function mcpList(turn: Turn): Promise<void> {
  try {
    const { tools } = await turn.untilCancelled(withMcpClient(turn, (c) => c.listTools()));
    await turn.message(`mcp tools: ${tools.map((t) => t.name).join(", ")}`);
  } catch (error) {
    turn.checkCancelled();
    await turn.message(`mcp error: ${errorText(error)}`);
  }
}
