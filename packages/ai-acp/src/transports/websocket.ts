import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { WebSocket } from "ws";
import type { AcpSessionTransport, ExitInfo } from "../config.js";

export interface WebSocketTransportOptions {
  headers?: Record<string, string>;
  protocols?: string[];
  /** Give up if the socket is not open after this long. Default 10 s. */
  connectTimeoutMs?: number;
}

/**
 * ACP over a WebSocket (one JSON-RPC message per text frame), using `ws` so it
 * works on Node 20, which has no global WebSocket client.
 */
export async function webSocketTransport(
  url: string,
  options: WebSocketTransportOptions = {},
): Promise<AcpSessionTransport> {
  const socket = await openSocket(url, options);
  const exited = new Promise<ExitInfo>((resolve) => {
    socket.once("close", (code: number) => resolve({ code, signal: null }));
  });
  // The SDK stream takes a constructor; hand it the socket we already opened so
  // connection errors surface here, before any ACP traffic.
  const Preopened = function () {
    return socket;
  } as unknown as typeof WebSocket;
  const stream = createWebSocketStream(url, { WebSocket: Preopened });
  return {
    kind: "stream",
    stream,
    exited,
    dispose: async () => {
      if (socket.readyState !== WebSocket.CLOSED) {
        socket.close();
        await Promise.race([exited, delay(2_000).then(() => socket.terminate())]);
      }
    },
  };
}

function openSocket(url: string, options: WebSocketTransportOptions): Promise<WebSocket> {
  const socket = new WebSocket(url, options.protocols, {
    ...(options.headers ? { headers: options.headers } : {}),
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.terminate();
      reject(new Error(`WebSocket ${url} did not open within ${options.connectTimeoutMs ?? 10_000} ms`));
    }, options.connectTimeoutMs ?? 10_000);
    socket.once("open", () => {
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once("error", (err: Error) => {
      clearTimeout(timer);
      reject(new Error(`WebSocket ${url} failed: ${err.message}`));
    });
  });
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
