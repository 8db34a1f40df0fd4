import { fileURLToPath } from "node:url";
import type { SandboxInstance, SandboxProcess } from "@sandbox-agent/ai-sandbox";
import { READY_MARKER } from "./bin/ready-marker.js";
import type { AcpSessionTransport } from "./config.js";
import { webSocketTransport } from "./transports/websocket.js";

export interface StartAcpServerOptions {
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

export interface AcpServerHandle {
  readonly url: string;
  /** Opens one ACP connection (= one agent process) to the server. */
  connect(signal?: AbortSignal): Promise<AcpSessionTransport>;
  /** Stops the server and every agent it started. */
  dispose(): Promise<void>;
}

const BRIDGE_SCRIPT = fileURLToPath(new URL("./bin/acp-ws-bridge.js", import.meta.url));

/**
 * Starts a WebSocket ACP server inside the sandbox that bridges each connection
 * to a fresh `command` process over stdio. The bridge is a Node script, so the
 * sandbox must be able to run this package's files (true for the local-process provider and a
 * sandbox-agent server on this machine).
 */
export async function startAcpServerInSandbox(
  sandbox: SandboxInstance,
  options: StartAcpServerOptions,
): Promise<AcpServerHandle> {
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

async function waitForReady(proc: SandboxProcess, timeoutMs: number, signal?: AbortSignal): Promise<number> {
  const reader = proc.stdout.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  const failure = new Promise<never>((_, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`ACP server not ready after ${timeoutMs} ms`)),
      timeoutMs,
    );
    timer.unref();
    signal?.addEventListener("abort", () => reject(new Error("aborted while starting the ACP server")), {
      once: true,
    });
    void proc.exited.then(({ code, signal: sig }) =>
      reject(
        new Error(
          `ACP server exited before ready (code ${code}, signal ${sig}): ${proc.stderrTail().slice(-2000)}`,
        ),
      ),
    );
  });
  for (;;) {
    const chunk = await Promise.race([reader.read(), failure]);
    if (chunk.done)
      throw new Error(`ACP server closed stdout before ready: ${proc.stderrTail().slice(-2000)}`);
    buffered += decoder.decode(chunk.value, { stream: true });
    const match = new RegExp(`^${READY_MARKER} (\\d+)$`, "m").exec(buffered);
    if (match?.[1]) {
      void drain(reader);
      return Number(match[1]);
    }
  }
}

/** Keep reading so a chatty server never blocks on a full stdout pipe. */
async function drain(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<void> {
  try {
    while (!(await reader.read()).done) {
      // discard
    }
  } catch {
    // process gone
  }
}

function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
