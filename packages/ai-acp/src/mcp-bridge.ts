import { randomBytes } from "node:crypto";
import {
  createServer,
  type IncomingMessage,
  type Server as HttpServer,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import type { McpServer } from "@agentclientprotocol/sdk";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  type CallToolResult,
  type Tool as McpTool,
} from "@modelcontextprotocol/sdk/types.js";

/** A chat() tool as the bridge advertises it. */
export interface BridgeTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown> | undefined;
}

/** A tool call the agent made through the bridge, waiting for the engine to run the tool. */
export interface BridgedToolCall {
  readonly toolCallId: string;
  readonly toolName: string;
  readonly args: Record<string, unknown>;
  complete(result: CallToolResult): void;
  fail(message: string): void;
}

export interface McpBridgeOptions {
  /** The MCP server name the agent sees. */
  name: string;
  tools: () => ReadonlyArray<BridgeTool>;
  onCall: (call: BridgedToolCall) => void;
  createId: () => string;
}

const STDIO_PROXY = fileURLToPath(new URL("./bin/mcp-stdio-proxy.js", import.meta.url));

/**
 * Exposes chat() tools to the agent as an MCP server on 127.0.0.1. The server
 * does not run tools: each call is handed to the chat engine (through the
 * adapter), so `needsApproval`, input validation and middleware apply, and the
 * MCP response waits for the engine's result.
 */
export class McpToolBridge {
  private constructor(
    private readonly http: HttpServer,
    readonly url: string,
    private readonly token: string,
    private readonly name: string,
  ) {}

  static async start(options: McpBridgeOptions): Promise<McpToolBridge> {
    const token = randomBytes(24).toString("hex");
    const http = createServer((req, res) => void handle(req, res, token, options));
    await new Promise<void>((resolve, reject) => {
      http.once("error", reject);
      http.listen(0, "127.0.0.1", () => resolve());
    });
    const { port } = http.address() as AddressInfo;
    return new McpToolBridge(http, `http://127.0.0.1:${port}/mcp`, token, options.name);
  }

  /**
   * The `mcpServers` entry for session/new: HTTP when the agent advertises
   * `mcpCapabilities.http`, otherwise the stdio baseline every agent supports,
   * via a small proxy process that forwards to the same HTTP server.
   */
  serverEntry(httpSupported: boolean): McpServer {
    const authorization = { name: "Authorization", value: `Bearer ${this.token}` };
    if (httpSupported) return { type: "http", name: this.name, url: this.url, headers: [authorization] };
    return {
      name: this.name,
      command: process.execPath,
      args: [STDIO_PROXY, this.url],
      env: [{ name: "MCP_BRIDGE_TOKEN", value: this.token }],
    };
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.http.close(() => resolve());
      this.http.closeAllConnections();
    });
  }
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  token: string,
  options: McpBridgeOptions,
): Promise<void> {
  if (req.headers.authorization !== `Bearer ${token}`) {
    res.writeHead(401, { "content-type": "application/json" }).end('{"error":"unauthorized"}');
    return;
  }
  // Stateless: one MCP server per HTTP request, so nothing leaks between agents.
  const server = mcpServer(options);
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
  });
  res.on("close", () => {
    void transport.close();
    void server.close();
  });
  try {
    await server.connect(transport);
    await transport.handleRequest(req, res);
  } catch (err) {
    if (!res.headersSent) res.writeHead(500).end(String(err));
  }
}

function mcpServer(options: McpBridgeOptions): Server {
  const server = new Server({ name: options.name, version: "0.1.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: options.tools().map(toMcpTool) }));
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    const tool = options.tools().find((candidate) => candidate.name === request.params.name);
    if (!tool) return errorResult(`Unknown tool: ${request.params.name}`);
    return new Promise<CallToolResult>((resolve) => {
      extra.signal.addEventListener("abort", () => resolve(errorResult("cancelled")), { once: true });
      options.onCall({
        toolCallId: options.createId(),
        toolName: tool.name,
        args: request.params.arguments ?? {},
        complete: resolve,
        fail: (message) => resolve(errorResult(message)),
      });
    });
  });
  return server;
}

function toMcpTool(tool: BridgeTool): McpTool {
  const schema = tool.inputSchema ?? { type: "object", properties: {} };
  return { name: tool.name, description: tool.description, inputSchema: { ...schema, type: "object" } };
}

function errorResult(text: string): CallToolResult {
  return { content: [{ type: "text", text }], isError: true };
}
