import type { SandboxChannel, SandboxInstance } from "@sandbox-agent/ai-sandbox";
import type { Stream } from "@agentclientprotocol/sdk";
import type { ExitInfo } from "./config.js";
import { waitForOutput } from "./sandbox-ready.js";
import { webSocketTransport, type WebSocketTransportOptions } from "./transports/websocket.js";

export interface StartAcpServerOptions {
  /**
   * Shell command, run inside the sandbox, that starts the agent's own WebSocket ACP server on
   * `port` (e.g. `my-agent serve --bind 0.0.0.0:9100`). It must bind an address the sandbox's
   * channel reaches: `0.0.0.0` in a container, loopback is enough for a local sandbox.
   */
  command: string;
  /** The port the server listens on inside the sandbox. */
  port: number;
  cwd?: string;
  env?: Record<string, string>;
  /**
   * Text (or a pattern) the server prints on stdout or stderr once it accepts connections.
   * Default: the first line of output.
   */
  readyMarker?: string | RegExp;
  /**
   * The URL this machine connects to, from how it reaches the sandbox (`channel.url`, e.g.
   * `http://127.0.0.1`) and the port that reaches the server (for a container, the published
   * port of `port`). Default: `ws://<channel host>:<port>`.
   */
  buildWsUrl?: (address: { channel: SandboxChannel; port: number }) => string;
  /** Headers of every WebSocket handshake (e.g. the agent server's own token). */
  headers?: Record<string, string>;
  /** Default 30 s. */
  readyTimeoutMs?: number;
  signal?: AbortSignal;
}

/** One WebSocket ACP connection to the agent's server. */
export interface AcpWebSocket {
  readonly stream: Stream;
  /** Settles when the socket closed (its close code as `code`). */
  readonly closed: Promise<ExitInfo>;
  close(): void;
}

export interface AcpServerHandle {
  /** The URL connections open. */
  readonly url: string;
  /** Opens one ACP connection to the server. */
  connect(signal?: AbortSignal): Promise<AcpWebSocket>;
  /** Closes the connections opened here and stops the server (its whole process group). */
  dispose(): Promise<void>;
}

/**
 * Starts the agent's own WebSocket ACP server inside the sandbox (`command`), waits for
 * `readyMarker` in its output, and returns how to connect to it from this machine through the
 * sandbox's channel: the same port for a local or remote sandbox, the published port for a
 * container (list the port in the container provider's `ports`). For an agent that speaks ACP
 * only on stdio, `startAcpBridgeInSandbox` puts a WebSocket server in front of it.
 */
export async function startAcpServerInSandbox(
  sandbox: SandboxInstance,
  options: StartAcpServerOptions,
): Promise<AcpServerHandle> {
  const { channel } = sandbox;
  if (channel === undefined)
    throw new TypeError(
      `startAcpServerInSandbox: the ${sandbox.provider} sandbox "${sandbox.id}" has no network this machine reaches`,
    );
  if (!Number.isInteger(options.port) || options.port <= 0 || options.port > 65535)
    throw new TypeError(`startAcpServerInSandbox: port must be a port number (1-65535), got ${options.port}`);
  const proc = await sandbox.spawn(options.command, {
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
    ...(options.env !== undefined ? { env: options.env } : {}),
  });
  let url: string;
  try {
    await waitForOutput(proc, readyTest(options.readyMarker), {
      timeoutMs: options.readyTimeoutMs ?? 30_000,
      signal: options.signal,
      stderr: true,
      what: `the agent's ACP server (${options.command})`,
    });
    const port = await channel.reach(options.port);
    url = options.buildWsUrl
      ? options.buildWsUrl({ channel, port })
      : `${channel.url.replace(/^http/i, "ws")}:${port}`;
  } catch (error) {
    await proc.kill();
    throw error;
  }
  const open = new Set<() => Promise<void>>();
  const transportOptions: WebSocketTransportOptions = options.headers ? { headers: options.headers } : {};
  return {
    url,
    connect: async (signal) => {
      signal?.throwIfAborted();
      const transport = await webSocketTransport(url, transportOptions);
      const dispose = () => transport.dispose();
      open.add(dispose);
      const closed = transport.exited ?? Promise.resolve({ code: null, signal: null });
      void closed.then(() => open.delete(dispose));
      signal?.addEventListener("abort", () => void dispose(), { once: true });
      return { stream: transport.stream, closed, close: () => void dispose() };
    },
    dispose: async () => {
      await Promise.all([...open].map((dispose) => dispose()));
      await proc.kill();
    },
  };
}

/** The ready test for `marker`: any output at all when none is given. */
function readyTest(marker: string | RegExp | undefined): (output: string) => true | undefined {
  if (marker === undefined) return (output) => (output.includes("\n") ? true : undefined);
  if (typeof marker === "string") return (output) => (output.includes(marker) ? true : undefined);
  return (output) => (marker.test(output) ? true : undefined);
}
