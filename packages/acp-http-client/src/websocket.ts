/**
 * The WebSocket transport: one socket to `/v2/rpc` carrying one JSON-RPC message per text frame,
 * instead of POSTs and an SSE stream. The server names the connection and the event id its
 * stream starts after in the initialize result (`_meta["sandboxagent.dev"].connection`); every
 * later frame is the next event, so counting frames gives the last event id, and a dropped socket
 * is resumed from it (`?connectionId=&lastEventId=`) with nothing lost and nothing twice.
 *
 * Nothing the client writes is lost either, and no frame per message acknowledges it: messages
 * are numbered (1 = the first after `initialize`), and a resumed socket's first frame, which is
 * no event, says how many of them the server process handled (`_sandboxagent/transport/resumed`);
 * the rest are sent again, in order (see `Outbox`). A frame and not a header of the 101, which
 * browsers cannot read. After a server restart the count is gone (`received: null`); what the
 * client then decides is in `settleUnknown`.
 *
 * Authentication: browsers cannot send headers on a WebSocket and a token must not travel in a
 * URL, so when the options carry `Authorization` a single-use ticket is fetched first
 * (`POST {path}/ticket`) and passed as `?ticket=`. The headers are also handed to the constructor
 * as `ws` (Node) takes them; browsers ignore them.
 */
import type { AnyMessage, AnyRequest } from "@agentclientprotocol/sdk";
import { AcpConnectionLostError, httpErrorFrom } from "./errors.js";
import { callSafely } from "./listeners.js";
import { idKey, isRecord, isRequest, isResponse, parseMessage, type JsonRpcId } from "./messages.js";
import {
  resolveOptions,
  type AcpEnvelope,
  type AcpHttpStreamOptions,
  type ResolvedOptions,
} from "./options.js";
import { Outbox, type Outgoing } from "./outbox.js";
import { streamFacade, type AcpCloseReason, type AcpHttpStream } from "./stream.js";

/** The standard WebSocket interface, as browsers, Node 22 and `ws` implement it. */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "open", listener: () => void): void;
  addEventListener(type: "message", listener: (event: { data: unknown }) => void): void;
  addEventListener(type: "close", listener: (event: { code: number; reason: string }) => void): void;
  addEventListener(type: "error", listener: (event: unknown) => void): void;
}

/**
 * A WebSocket constructor called like the standard one; a third argument `{ headers }` is passed
 * too, which `ws` uses and browsers ignore.
 */
export type WebSocketConstructor = new (
  url: string,
  protocols?: string | string[],
  options?: { headers: Record<string, string> },
) => WebSocketLike;

const OPEN = 1;
/** Close codes after which the connection is over: it ended, was closed, or another socket took it. */
const FINAL_CLOSES = new Set([1000, 1001, 1008, 4409, 4410]);
const META_KEY = "sandboxagent.dev";
/** The first frame of a resumed socket, when the client asked for acknowledgements. */
const RESUMED_METHOD = "_sandboxagent/transport/resumed";

/** What a request gets that a restarted server has no record of (see `settleUnknown`). */
const UNREAD_MESSAGE =
  "The server restarted before this request reached the agent: the restarted server has no record of it and will not answer it. " +
  "It is safe to send it again: the server records every request before anything acts on it, so one it has no record of never ran.";

export function createWebSocketTransport(input: AcpHttpStreamOptions): AcpHttpStream {
  return new WebSocketTransport(input).stream;
}

class WebSocketTransport {
  readonly stream: AcpHttpStream;
  private readonly options: ResolvedOptions;
  private readonly WebSocket: WebSocketConstructor;
  private controller!: ReadableStreamDefaultController<AnyMessage>;
  private socket: WebSocketLike | undefined;
  /** Resolves once a socket is open (again); writes wait for it. */
  private opened: Promise<WebSocketLike> | undefined;
  private connectionId: string | undefined;
  private protocolVersion: number | undefined;
  private epoch: string | undefined;
  private seq = 0;
  private initializeId: unknown;
  /** Whether the server acknowledges (says so in the initialize result); undefined until then. */
  private acks: boolean | undefined;
  private readonly outbox = new Outbox();
  /** Settles the socket being resumed once its `resumed` frame came (acknowledging servers). */
  private onResumed: (() => void) | undefined;
  /**
   * Requests written to a server process that has since restarted, with no answer yet; settled
   * once the replay reaches the head the new process named (`unknownUntil`).
   */
  private unknown = new Map<string, AnyRequest>();
  private unknownUntil = 0;
  private isClosed = false;
  private failure: Error | undefined;
  private resolveClosed!: (reason: AcpCloseReason) => void;

  constructor(input: AcpHttpStreamOptions) {
    this.options = resolveOptions(input);
    const Standard = input.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!Standard)
      throw new TypeError(
        "acp-http-client: no WebSocket implementation; pass the `WebSocket` option (e.g. ws)",
      );
    this.WebSocket = Standard;
    onlineTarget?.addEventListener("online", this.onOnline);
    const closed = new Promise<AcpCloseReason>((resolve) => (this.resolveClosed = resolve));
    this.stream = streamFacade(
      {
        start: (controller) => void (this.controller = controller),
        write: (message) => this.write(message),
        close: () => this.close(),
        attach: () =>
          Promise.reject(
            new Error(
              'acp-http-client: attach needs transport "http"; a WebSocket resumes only its own connection',
            ),
          ),
        detach: () => this.close(true),
        state: () => ({
          connectionId: this.connectionId,
          protocolVersion: this.protocolVersion,
          failure: this.failure,
        }),
      },
      closed,
      input.signal,
    );
  }

  private async write(message: AnyMessage): Promise<void> {
    if (this.isClosed) throw new Error("acp-http-client: stream is closed");
    this.observe({ direction: "outbound", message });
    if (this.opened === undefined) {
      if (!isRequest(message) || message.method !== "initialize")
        throw this.fail(new Error("acp-http-client: the first message must be an initialize request"));
      this.initializeId = message.id;
      this.opened = this.open();
      (await this.openSocket()).send(JSON.stringify(message));
      return;
    }
    const text = JSON.stringify(message);
    if (this.acks === false) return (await this.openSocket()).send(text);
    const entry = this.outbox.add(message, text);
    const socket = await this.openSocket();
    // A resume may have sent it already, after the ones before it.
    if (!entry.sent) this.sendEntry(socket, entry);
  }

  private sendEntry(socket: WebSocketLike, entry: Outgoing): void {
    entry.sent = true;
    socket.send(entry.text);
  }

  /**
   * The socket to write to, once open. A socket that is closing (the server went away and its
   * close is not handled yet) would drop the message without a word, so the write waits for the
   * resume that the close starts, and goes on the new socket.
   */
  private async openSocket(): Promise<WebSocketLike> {
    for (;;) {
      const socket = await this.opened!;
      if (this.isClosed) throw new Error("acp-http-client: stream is closed");
      if (socket.readyState === OPEN) return socket;
      if (this.socket === socket)
        await new Promise<void>((resolve) => socket.addEventListener("close", () => resolve()));
    }
  }

  /** Opens a socket: a new connection, or a resume of ours after the last event we got. */
  private async open(): Promise<WebSocketLike> {
    const url = new URL(this.options.url);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    if (this.connectionId !== undefined) {
      url.searchParams.set("connectionId", this.connectionId);
      url.searchParams.set("lastEventId", `${this.epoch}.${this.seq}`);
    }
    const resuming = this.connectionId !== undefined && this.acks === true;
    if (resuming) url.searchParams.set("acks", "1");
    const headers = this.options.headers;
    if (Object.keys(headers).some((name) => name.toLowerCase() === "authorization")) {
      url.searchParams.set("ticket", await this.ticket());
    }
    const socket = new this.WebSocket(url.toString(), undefined, { headers });
    this.socket = socket;
    socket.addEventListener("message", (event) => this.onFrame(socket, event.data));
    let isOpen = false;
    await new Promise<void>((resolve, reject) => {
      const ready = (): void => {
        isOpen = true;
        this.onResumed = undefined;
        resolve();
      };
      // A resume is open once the server said what it has: until then, writes wait.
      socket.addEventListener("open", () => (resuming ? (this.onResumed = ready) : ready()));
      socket.addEventListener("close", (event) => {
        if (isOpen) return this.onClose(socket, event.code, event.reason);
        if (this.onResumed === ready) this.onResumed = undefined;
        reject(new Error(`the WebSocket upgrade failed (${event.code})`));
      });
    });
    return socket;
  }

  private async ticket(): Promise<string> {
    const response = await this.options.fetch(`${this.options.url.toString().replace(/\/$/, "")}/ticket`, {
      method: "POST",
      headers: this.options.headers,
      signal: AbortSignal.timeout(this.options.postTimeoutMs),
    });
    if (!response.ok) throw await httpErrorFrom("ACP WebSocket ticket failed", response);
    const body = (await response.json()) as { ticket?: unknown };
    if (typeof body.ticket !== "string") throw new Error("acp-http-client: ticket response has no ticket");
    return body.ticket;
  }

  private onFrame(socket: WebSocketLike, data: unknown): void {
    if (this.isClosed || socket !== this.socket || typeof data !== "string") return;
    const message = parseMessage(data);
    if (!message) {
      this.fail(
        new Error(`acp-http-client: WebSocket frame is not a JSON-RPC message: ${data.slice(0, 200)}`),
      );
      return;
    }
    if (this.onResumed !== undefined) {
      if (!("method" in message) || message.method !== RESUMED_METHOD) {
        this.fail(new Error("acp-http-client: the resumed WebSocket did not start with its acknowledgement"));
        return;
      }
      this.resumed(socket, isRecord(message.params) ? message.params : {});
      return;
    }
    if (this.connectionId === undefined) {
      if (isResponse(message) && message.id === this.initializeId) this.accept(message);
    } else {
      this.seq++;
      if (isResponse(message)) {
        this.outbox.answered(message.id);
        this.unknown.delete(idKey(message.id));
      }
    }
    const eventId =
      this.epoch === undefined || this.connectionId === undefined ? undefined : `${this.epoch}.${this.seq}`;
    this.observe({ direction: "inbound", message, ...(eventId === undefined ? {} : { eventId }) });
    this.controller.enqueue(message);
    if (eventId !== undefined && this.options.onEventId && !this.isClosed)
      callSafely(this.options.onEventId, eventId);
    if (this.unknown.size > 0 && this.seq >= this.unknownUntil) this.settleUnknown();
  }

  /**
   * The first frame of a resumed socket. The same server process: what it did not handle is sent
   * again, in order, exactly once (it drops what the old socket still had queued). A restarted
   * process (`received: null`): see `settleUnknown`; messages never written go to it.
   */
  private resumed(socket: WebSocketLike, params: Record<string, unknown>): void {
    const resume = this.onResumed!;
    const { received, head } = params;
    if (typeof received === "number") {
      for (const entry of this.outbox.resumeAt(received)) this.sendEntry(socket, entry);
    } else {
      for (const { request } of this.outbox.restarted())
        if (request) this.unknown.set(idKey(request.id), request);
      const [, seq] = typeof head === "string" ? head.split(".") : [];
      this.unknownUntil = Number(seq ?? 0);
      for (const entry of this.outbox.resumeAt(0)) this.sendEntry(socket, entry);
      if (this.seq >= this.unknownUntil) this.settleUnknown();
    }
    resume();
  }

  /**
   * A request written to a server process that died, once the replay reached the head of the
   * restarted one with no answer to it: it fails now, not at `requestTimeoutMs`. Why that is
   * sure: the server records every request it reads from a WebSocket (on disk, before the agent
   * or the server's own `_sandboxagent/*` methods act on it, and refuses one it cannot record), and
   * a restarted server answers each recorded request still unanswered with a `server_restarted`
   * error, in the log before the head it names; answers are logged before they are delivered. So
   * no answer by the head means the dead process never acted on the request: it will never be
   * answered, and sending it again is safe. Notifications and answers to the
   * agent's requests of the dead process are dropped, not sent again: whether it read them is
   * unknown (sending again could duplicate them), and their addressee, the agent process, died
   * with it (the restarted server failed its turns in flight and withdrew its requests).
   */
  private settleUnknown(): void {
    const requests = [...this.unknown.values()];
    this.unknown.clear();
    for (const request of requests) {
      const error = {
        jsonrpc: "2.0" as const,
        id: request.id as JsonRpcId,
        error: {
          code: -32603,
          message: UNREAD_MESSAGE,
          data: { reason: "server_restarted", reachedAgent: false },
        },
      };
      this.observe({ direction: "inbound", message: error });
      this.controller.enqueue(error);
    }
  }

  /** The initialize answer: learn the connection and where its event stream starts. */
  private accept(response: AnyMessage): void {
    if (!("result" in response) || !isRecord(response.result)) return; // refused: the server closes
    const result = response.result;
    const meta = isRecord(result._meta) && isRecord(result._meta[META_KEY]) ? result._meta[META_KEY] : {};
    const connection = isRecord(meta.connection) ? meta.connection : {};
    const [epoch, seq] = typeof connection.eventId === "string" ? connection.eventId.split(".") : [];
    if (typeof connection.id !== "string" || epoch === undefined || seq === undefined) {
      this.fail(new Error("acp-http-client: the initialize result does not name the connection"));
      return;
    }
    const version = result.protocolVersion;
    if (typeof version !== "number" || !this.options.protocolVersions.includes(version)) {
      this.fail(
        new Error(
          `acp-http-client: agent negotiated protocol version ${String(version)}, ` +
            `client supports ${this.options.protocolVersions.join(", ")}`,
        ),
      );
      return;
    }
    this.connectionId = connection.id;
    this.acks = connection.acks === true;
    if (!this.acks) this.outbox.clear();
    this.epoch = epoch;
    this.seq = Number(seq);
    this.protocolVersion = version;
  }

  /**
   * The browser is back online: a socket that lived through the outage may be half-open (no close
   * ever comes, and a browser cannot see the server's pings), so it is replaced by a resume from
   * the last event received. The old socket is closed as a drop, leaving the connection alone.
   */
  private readonly onOnline = (): void => {
    const socket = this.socket;
    if (this.isClosed || socket === undefined) return;
    this.socket = undefined;
    if (socket.readyState === OPEN) socket.close(DETACH_CLOSE_CODE);
    this.opened = this.reconnect();
    this.opened.catch(() => undefined);
  };

  private onClose(socket: WebSocketLike, code: number, reason: string): void {
    if (this.isClosed || socket !== this.socket) return;
    this.socket = undefined;
    if (this.connectionId === undefined || FINAL_CLOSES.has(code) || (code >= 4000 && code < 5000)) {
      this.fail(
        new AcpConnectionLostError(`the server closed the WebSocket (${code}${reason ? ` ${reason}` : ""})`),
      );
      return;
    }
    this.opened = this.reconnect();
    this.opened.catch(() => undefined);
  }

  /** Reopens the socket after a drop, with backoff, resuming after the last event received. */
  private async reconnect(): Promise<WebSocketLike> {
    const { initialDelayMs, factor, maxDelayMs, maxAttempts } = this.options.reconnect;
    let lastError: unknown;
    for (let attempt = 1; attempt <= maxAttempts && !this.isClosed; attempt++) {
      try {
        return await this.open();
      } catch (error) {
        lastError = error;
        if (isFatal(error)) break;
        await sleep(Math.min(initialDelayMs * factor ** (attempt - 1), maxDelayMs));
      }
    }
    const error = new AcpConnectionLostError(
      `WebSocket could not be re-established${lastError instanceof Error ? `: ${lastError.message}` : ""}`,
      { cause: lastError },
    );
    throw this.fail(error);
  }

  private observe(envelope: AcpEnvelope): void {
    if (this.options.onEnvelope) callSafely(this.options.onEnvelope, envelope);
  }

  /** `keepConnection` (detach): close the socket as a drop, so the server keeps the connection. */
  private close(keepConnection = false): Promise<void> {
    if (!this.isClosed) {
      this.isClosed = true;
      onlineTarget?.removeEventListener("online", this.onOnline);
      // A deliberate close: the server ends the connection, as DELETE does; any other code is a drop.
      if (this.socket?.readyState === OPEN) this.socket.close(keepConnection ? DETACH_CLOSE_CODE : 1000);
      try {
        this.controller.close();
      } catch {
        // already errored or closed
      }
      this.resolveClosed({ kind: "closed" });
    }
    return Promise.resolve();
  }

  private fail(error: Error): Error {
    if (this.isClosed) return error;
    this.isClosed = true;
    onlineTarget?.removeEventListener("online", this.onOnline);
    this.failure = error;
    if (this.socket?.readyState === OPEN) this.socket.close(1000);
    this.controller.error(error);
    this.resolveClosed({ kind: "error", error });
    return error;
  }
}

/** Where a browser announces that the network is back (`window`); absent in Node. */
const onlineTarget = (globalThis as { addEventListener?: unknown }).addEventListener
  ? (globalThis as unknown as Pick<EventTarget, "addEventListener" | "removeEventListener">)
  : undefined;

/** A close code of the application range (4000–4999): the server treats it as a drop, not an end. */
const DETACH_CLOSE_CODE = 4000;

/** A refusal no retry can fix: the connection is gone or the credentials are refused. */
function isFatal(error: unknown): boolean {
  const status = (error as { status?: unknown }).status;
  return typeof status === "number" && [401, 403, 404, 410].includes(status);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
