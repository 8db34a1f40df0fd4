import { WebSocket, type RawData } from "ws";
import type { RpcMessage } from "./rpc.js";

export interface WsOpenOptions {
  headers?: Record<string, string>;
  /** Query parameters of the upgrade URL. */
  query?: Record<string, string>;
}

/** How an upgrade was refused: the HTTP status and problem body. */
export interface Refused {
  status: number;
  body: string;
}

/** A raw `/v2/rpc` WebSocket that collects frames so tests can wait for them. */
export class WsRpc {
  readonly frames: RpcMessage[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  /** The 101's headers. */
  headers: Record<string, string | string[] | undefined> = {};
  private cutPredicate: ((m: RpcMessage) => boolean) | undefined;

  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data) => this.onMessage(data));
    ws.on("upgrade", (res) => (this.headers = res.headers));
    this.closed = new Promise((resolve) =>
      ws.once("close", (code, reason) => resolve({ code, reason: String(reason) })),
    );
  }

  /** Opens a socket; resolves with it once open, or with how the upgrade was refused. */
  static open(baseUrl: string, options: WsOpenOptions = {}): Promise<WsRpc | Refused> {
    const url = new URL("/v2/rpc", baseUrl.replace(/^http/, "ws"));
    for (const [name, value] of Object.entries(options.query ?? {})) url.searchParams.set(name, value);
    const ws = new WebSocket(url, { headers: options.headers });
    const rpc = new WsRpc(ws);
    return new Promise((resolve, reject) => {
      ws.once("open", () => resolve(rpc));
      ws.once("unexpected-response", (_req, res) => {
        let body = "";
        res.setEncoding("utf8").on("data", (d: string) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      });
      ws.once("error", reject);
    });
  }

  private onMessage(data: RawData): void {
    const message = JSON.parse(String(data)) as RpcMessage;
    this.frames.push(message);
    if (!this.cutPredicate?.(message)) return;
    this.cutPredicate = undefined;
    this.ws.terminate();
  }

  /**
   * Drops the socket without a close frame (a network cut) right after the first frame `predicate`
   * accepts. The cut is made in the frame handler, not by a test polling `frames`: on a busy machine
   * a poll can run late, after the whole stream arrived, and the cut would land after its end.
   * Frames the socket had already read still arrive, and count, before `closed` resolves.
   */
  cutAfter(predicate: (m: RpcMessage) => boolean): void {
    this.cutPredicate = predicate;
  }

  send(message: Record<string, unknown>): void {
    this.ws.send(JSON.stringify({ jsonrpc: "2.0", ...message }));
  }

  async waitFor(predicate: (m: RpcMessage) => boolean, timeoutMs = 15_000): Promise<RpcMessage> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.frames.find(predicate);
      if (found) return found;
      if (Date.now() > deadline)
        throw new Error(`timed out; got ${JSON.stringify(this.frames).slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

export function isOpen(value: WsRpc | Refused): value is WsRpc {
  return value instanceof WsRpc;
}

/** Opens a socket that must be accepted. */
export async function openWs(baseUrl: string, options?: WsOpenOptions): Promise<WsRpc> {
  const result = await WsRpc.open(baseUrl, options);
  if (!isOpen(result)) throw new Error(`upgrade refused: ${result.status} ${result.body}`);
  return result;
}

/** Opens a socket that must be refused. */
export async function refusedWs(baseUrl: string, options?: WsOpenOptions): Promise<Refused> {
  const result = await WsRpc.open(baseUrl, options);
  if (isOpen(result)) {
    result.ws.terminate();
    throw new Error("upgrade was accepted");
  }
  return result;
}
