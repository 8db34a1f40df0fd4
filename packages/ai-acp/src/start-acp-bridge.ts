import { fileURLToPath } from "node:url";
import type { SandboxInstance, SandboxProcess } from "@sandbox-agent/ai-sandbox";
import { READY_MARKER } from "./bin/ready-marker.js";
import type { AcpSessionTransport } from "./config.js";
import { waitForOutput } from "./sandbox-ready.js";
import { webSocketTransport } from "./transports/websocket.js";

export interface StartAcpBridgeOptions {
  /** Shell command that starts the agent's ACP server on stdio; one instance per WebSocket connection. */
  command: string;
  cwd?: string;
  env?: Record<string, string>;
  /** Interface the server binds inside the sandbox. Default `127.0.0.1`. */
  host?: string;
  /** Port inside the sandbox; 0 (default) picks a free one. */
  port?: number;
  /** Maps the sandbox-side address to the URL the app connects to. Default `ws://<host>:<port>`. */
  buildWsUrl?: (address: { host: string; port: number }) => string;
  /** Node binary inside the sandbox. Default: this process' binary. */
  nodeBinary?: string;
  readyTimeoutMs?: number;
  signal?: AbortSignal;
}

export interface AcpBridgeHandle {
  readonly url: string;
  /** Opens one ACP connection (= one agent process) to the server. */
  connect(signal?: AbortSignal): Promise<AcpSessionTransport>;
  /** Stops the server and every agent it started. */
  dispose(): Promise<void>;
}

const BRIDGE_SCRIPT = fileURLToPath(new URL("./bin/acp-ws-bridge.js", import.meta.url));

/**
 * For agents that speak ACP only on stdio: starts a WebSocket ACP server inside the sandbox that
 * bridges each connection to a fresh `command` process over stdio. The bridge is a Node script,
 * so the sandbox must be able to run this package's files (true for the local-process provider
 * and a sandbox-agent server on this machine). For an agent that serves ACP over WebSocket
 * itself, use `startAcpServerInSandbox`.
 */
export async function startAcpBridgeInSandbox(
  sandbox: SandboxInstance,
  options: StartAcpBridgeOptions,
): Promise<AcpBridgeHandle> {
  const host = options.host ?? "127.0.0.1";
  const encoded = Buffer.from(options.command, "utf8").toString("base64");
  const node = options.nodeBinary ?? process.execPath;
  const line = [node, BRIDGE_SCRIPT, host, String(options.port ?? 0), encoded].map(shellQuote).join(" ");
  const proc = await sandbox.spawn(line, {
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
    ...(options.env !== undefined ? { env: options.env } : {}),
  });
  let port: number;
  try {
    port = await waitForReady(proc, options.readyTimeoutMs ?? 15_000, options.signal);
  } catch (err) {
    await proc.kill();
    throw err;
  }
  const url = options.buildWsUrl ? options.buildWsUrl({ host, port }) : `ws://${host}:${port}`;
  return {
    url,
    connect: () => webSocketTransport(url),
    dispose: () => proc.kill(),
  };
}

function waitForReady(proc: SandboxProcess, timeoutMs: number, signal?: AbortSignal): Promise<number> {
  const marker = new RegExp(`^${READY_MARKER} (\\d+)$`, "m");
  return waitForOutput(proc, (output) => marker.exec(output)?.[1], {
    timeoutMs,
    signal,
    what: "the ACP bridge",
  }).then(Number);
}

function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
