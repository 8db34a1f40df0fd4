#!/usr/bin/env node
/**
 * Stdio MCP server that forwards every message to the adapter's HTTP MCP
 * bridge. Used for agents that do not advertise `mcpCapabilities.http` (stdio
 * MCP servers are the ACP baseline).
 *
 * Usage: mcp-stdio-proxy <bridge url>   (bearer token in MCP_BRIDGE_TOKEN)
 */
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";

async function main(): Promise<void> {
  const url = process.argv[2];
  if (!url) {
    process.stderr.write("usage: mcp-stdio-proxy <bridge url>\n");
    process.exit(2);
  }
  const token = process.env["MCP_BRIDGE_TOKEN"] ?? "";
  const upstream = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const downstream = new StdioServerTransport();
  downstream.onmessage = (message) => {
    upstream.send(message).catch((err: unknown) => process.stderr.write(`mcp-stdio-proxy: ${String(err)}\n`));
  };
  upstream.onmessage = (message) => void downstream.send(message);
  downstream.onclose = () => void upstream.close().finally(() => process.exit(0));
  upstream.onerror = (err) => process.stderr.write(`mcp-stdio-proxy: ${err.message}\n`);
  await upstream.start();
  await downstream.start();
}

void main();
