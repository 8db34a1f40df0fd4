import type { AnyMessage, AnyRequest, Stream } from "@agentclientprotocol/sdk";
import type { EventSourceMessage } from "eventsource-parser";
import { AcpConnectionLostError, AcpHttpError, httpErrorFrom } from "./errors.js";
import {
  idKey,
  isNotification,
  isRecord,
  isRequest,
  isResponse,
  parseMessage,
  paramsSessionId,
  resultSessionId,
  type JsonRpcId,
} from "./messages.js";
import {
  resolveOptions,
  type AcpAttachTarget,
  type AcpEnvelope,
  type AcpHttpStreamOptions,
  type ResolvedOptions,
} from "./options.js";
import { consumeSse } from "./sse.js";
import { callSafely } from "./listeners.js";
import { createWebSocketTransport } from "./websocket.js";

/** Why a stream ended: `close()` (or the caller's signal), or a transport failure. */
export type AcpCloseReason = { kind: "closed" } | { kind: "error"; error: Error };

/** An ACP `Stream` over streamable HTTP (or a WebSocket), plus its connection state. */
export interface AcpHttpStream extends Stream {
  /** Set once `initialize` succeeded. */
  readonly connectionId: string | undefined;
  /** Negotiated protocol version, once `initialize` succeeded. */
  readonly protocolVersion: number | undefined;
  /** Resolves (never rejects) when the stream is finished. */
  readonly closed: Promise<AcpCloseReason>;
  /** The failure that ended the stream, if it failed. */
  readonly error: Error | undefined;
  /** Ends the stream and sends DELETE. Idempotent. */
  close(): Promise<void>;
  /**
   * Instead of `initialize`: continues a connection another client opened (one that crashed, or
   * handed it over with `detach`), reading its events after `target.lastEventId`; resolves once the
   * event stream is open. This client's request ids then carry a prefix of their own, so they never
   * collide with the earlier client's, which may still be in flight. Fails with
   * `AcpConnectionLostError` when the server no longer has the connection (404, 410).
   */
  attach(target: AcpAttachTarget): Promise<void>;
  /** Ends the stream but not the connection: the server keeps it, and its agent, for `attach`. */
  detach(): Promise<void>;
}

const CONNECTION_HEADER = "Acp-Connection-Id";
/** The same id under the name of the sandbox-agent HTTP contract; servers may know only one of the two. */
const X_CONNECTION_HEADER = "x-acp-connection-id";
const CANCEL_REQUEST_METHOD = "$/cancel_request";
const SESSION_HEADER = "Acp-Session-Id";
/** Statuses after which the connection id is unusable: auth lost, or the connection is gone. */
const FATAL_STATUSES = new Set([401, 403, 404, 410]);
const MAX_REMEMBERED_EVENT_IDS = 16_384;

/** Creates a `Stream` of JSON-RPC messages for `client().connect(stream)`. */
export function createAcpHttpStream(options: AcpHttpStreamOptions): AcpHttpStream {
  if (options.transport === "websocket") return createWebSocketTransport(options);
  return new HttpTransport(options).stream;
}

/** How one SSE GET went. `clean` = the server finished the body (not a broken socket). */
interface SseOutcome {
  openedAt: number;
  endedAt: number;
  delivered: boolean;
  clean: boolean;
}

/** A stream that ends cleanly right after opening, with nothing new, has nothing left to send. */
const ENDED_STREAM_MS = 2_000;

/** Worked for a while or delivered something: the next reconnect starts the backoff afresh. */
function isHealthy(outcome: SseOutcome): boolean {
  return outcome.delivered || outcome.endedAt - outcome.openedAt >= ENDED_STREAM_MS;
}

function isEndedStream(outcome: SseOutcome): boolean {
  return outcome.clean && !outcome.delivered && outcome.endedAt - outcome.openedAt < ENDED_STREAM_MS;
}

interface SseCursor {
  lastEventId: string | undefined;
  retryMs: number | undefined;
}

/** What `streamFacade` needs of a transport. */
export interface FacadeSource {
  start(controller: ReadableStreamDefaultController<AnyMessage>): void;
  write(message: AnyMessage): Promise<void>;
  close(): Promise<void>;
  attach(target: AcpAttachTarget): Promise<void>;
  detach(): Promise<void>;
  /** The transport's live state. */
  state(): {
    connectionId: string | undefined;
    protocolVersion: number | undefined;
    failure: Error | undefined;
  };
}

/**
 * The `AcpHttpStream` a transport hands out: its readable and writable sides, and live views of
 * its state without exposing the transport itself. Aborting `signal` closes it.
 */
export function streamFacade(
  source: FacadeSource,
  closed: Promise<AcpCloseReason>,
  signal: AbortSignal | undefined,
): AcpHttpStream {
  const readable = new ReadableStream<AnyMessage>({ start: source.start, cancel: () => source.close() });
  const writable = new WritableStream<AnyMessage>({
    write: (message) => source.write(message),
    close: () => source.close(),
    abort: () => source.close(),
  });
  const stream = Object.defineProperties(
    {
      readable,
      writable,
      closed,
      close: () => source.close(),
      attach: (target: AcpAttachTarget) => source.attach(target),
      detach: () => source.detach(),
    },
    {
      connectionId: { get: () => source.state().connectionId, enumerable: true },
      protocolVersion: { get: () => source.state().protocolVersion, enumerable: true },
      error: { get: () => source.state().failure, enumerable: true },
    },
  ) as AcpHttpStream;
  if (signal?.aborted) void source.close();
  else signal?.addEventListener("abort", () => void source.close(), { once: true });
  return stream;
}

class HttpTransport {
  readonly stream: AcpHttpStream;
  private readonly options: ResolvedOptions;
  private readonly abort = new AbortController();
  private controller!: ReadableStreamDefaultController<AnyMessage>;
  private connectionId: string | undefined;
  private protocolVersion: number | undefined;
  private isClosed = false;
  private failure: Error | undefined;
  /** An `attach` whose stream has not opened yet (the server may refuse it: another client reads). */
  private attaching = false;
  private resolveClosed!: (reason: AcpCloseReason) => void;
  private closing: Promise<void> | undefined;
  /** Our requests still awaiting a response: a response for anything else is a duplicate. */
  private readonly pending = new Set<string>();
  private readonly seenEventIds = new Set<string>();
  /** Session SSE streams, resolved once the GET answered 200. */
  private readonly sessionStreams = new Map<string, Promise<void>>();
  /** Agent requests that arrived on a session stream: our answer must name that session. */
  private readonly inboundRequestSessions = new Map<string, string>();
  /** Set by `attach`: this client's request ids on the wire are `<prefix><idKey(id)>`. */
  private idPrefix: string | undefined;
  /** Wire id key → the id the client app gave the request, for requests sent under `idPrefix`. */
  private readonly appIds = new Map<string, JsonRpcId>();

  constructor(input: AcpHttpStreamOptions) {
    this.options = resolveOptions(input);
    const closed = new Promise<AcpCloseReason>((resolve) => (this.resolveClosed = resolve));
    this.stream = streamFacade(
      {
        start: (controller) => void (this.controller = controller),
        write: (message) => this.write(message),
        close: () => this.close(),
        attach: (target) => this.attach(target),
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
    if (this.connectionId === undefined) await this.initialize(message);
    else await this.post(this.toWire(message), this.connectionId);
  }

  // ---- attach ------------------------------------------------------------

  private async attach(target: AcpAttachTarget): Promise<void> {
    if (this.isClosed) throw new Error("acp-http-client: stream is closed");
    if (this.connectionId !== undefined) throw new Error("acp-http-client: the stream is connected already");
    if (!this.options.protocolVersions.includes(target.protocolVersion)) {
      throw new TypeError(
        `acp-http-client: cannot attach to protocol version ${target.protocolVersion}; ` +
          `client supports ${this.options.protocolVersions.join(", ")}`,
      );
    }
    this.connectionId = target.connectionId;
    this.protocolVersion = target.protocolVersion;
    this.idPrefix = `${globalThis.crypto.randomUUID().slice(0, 8)}.`;
    // Until the stream opens the connection is another client's: a failure must not DELETE it.
    this.attaching = true;
    const opened = new Promise<undefined>(
      (resolve) =>
        void this.runSse(
          undefined,
          () => {
            this.attaching = false;
            resolve(undefined);
          },
          target.lastEventId ?? undefined,
        ),
    );
    const ended = await Promise.race([opened, this.stream.closed]);
    if (ended !== undefined) {
      throw ended.kind === "error" ? ended.error : new Error("acp-http-client: closed while attaching");
    }
  }

  /** After `attach`: this client's request ids (and the ids its `$/cancel_request`s name) get the prefix. */
  private toWire(message: AnyMessage): AnyMessage {
    const prefix = this.idPrefix;
    if (prefix === undefined) return message;
    if (isRequest(message)) {
      const id = `${prefix}${idKey(message.id)}`;
      this.appIds.set(idKey(id), message.id);
      return { ...message, id };
    }
    if (isNotification(message) && message.method === CANCEL_REQUEST_METHOD && isRecord(message.params)) {
      const requestId = message.params.requestId as JsonRpcId;
      return { ...message, params: { ...message.params, requestId: `${prefix}${idKey(requestId)}` } };
    }
    return message;
  }

  /** A response to one of this client's prefixed requests, with the id its client app gave it. */
  private fromWire(message: AnyMessage): AnyMessage {
    if (this.idPrefix === undefined || !isResponse(message)) return message;
    const key = idKey(message.id);
    const appId = this.appIds.get(key);
    if (appId === undefined) return message;
    this.appIds.delete(key);
    return { ...message, id: appId };
  }

  // ---- initialize --------------------------------------------------------

  private async initialize(message: AnyMessage): Promise<void> {
    if (!isRequest(message) || message.method !== "initialize") {
      throw this.fail(new Error("acp-http-client: the first message must be an initialize request"));
    }
    const response = await this.send(
      "POST",
      {},
      JSON.stringify(message),
      this.options.initializeTimeoutMs,
    ).catch((error: unknown) => {
      throw this.fail(asError(error, "initialize POST failed"));
    });
    if (!response.ok) throw this.fail(await httpErrorFrom("ACP initialize failed", response));
    const connectionId = response.headers.get(CONNECTION_HEADER) ?? response.headers.get(X_CONNECTION_HEADER);
    const body = parseMessage(await response.text());
    if (!body || !isResponse(body) || idKey(body.id) !== idKey(message.id)) {
      if (connectionId) void this.deleteConnection(connectionId);
      throw this.fail(
        new Error("acp-http-client: initialize answer is not the JSON-RPC response to the request"),
      );
    }
    if ("error" in body) {
      // The agent refused; there is no usable connection, but the stream may retry.
      if (connectionId) void this.deleteConnection(connectionId);
      this.deliver(body, undefined);
      return;
    }
    if (!connectionId)
      throw this.fail(new Error("acp-http-client: initialize response missing Acp-Connection-Id"));
    this.acceptInitialize(body.result, connectionId);
    this.deliver(body, undefined);
  }

  private acceptInitialize(result: unknown, connectionId: string): void {
    const version = isRecord(result) ? result.protocolVersion : undefined;
    if (typeof version !== "number" || !this.options.protocolVersions.includes(version)) {
      void this.deleteConnection(connectionId);
      throw this.fail(
        new Error(
          `acp-http-client: agent negotiated protocol version ${String(version)}, ` +
            `client supports ${this.options.protocolVersions.join(", ")}`,
        ),
      );
    }
    this.connectionId = connectionId;
    this.protocolVersion = version;
    void this.runSse(undefined);
  }

  // ---- POST --------------------------------------------------------------

  private async post(message: AnyMessage, connectionId: string): Promise<void> {
    const sessionId = this.sessionFor(message);
    if (sessionId !== undefined) await this.ensureSessionStream(sessionId);
    const key = isRequest(message) ? idKey(message.id) : undefined;
    // Registered before the POST: the response may beat the 202 on SSE.
    if (key !== undefined) this.pending.add(key);
    const headers = connectionHeaders(connectionId);
    if (sessionId !== undefined) headers[SESSION_HEADER] = sessionId;
    let response: Response;
    for (let attempt = 1; ; attempt++) {
      try {
        response = await this.send("POST", headers, JSON.stringify(message), this.options.postTimeoutMs);
        break;
      } catch (error) {
        if (this.isClosed) return;
        // Refused: nothing reached the server (restarting, say), so sending again cannot duplicate
        // the message; the SSE stream rides through the same restart with its Last-Event-ID.
        if (isConnectionRefused(error) && attempt <= this.options.reconnect.maxAttempts) {
          await sleep(
            this.reconnectDelay({ lastEventId: undefined, retryMs: undefined }, attempt),
            this.abort.signal,
          );
          continue;
        }
        // Otherwise the server may or may not have the message: retrying could duplicate it.
        throw this.fail(asError(error, "POST failed"));
      }
    }
    if (response.ok) {
      await response.body?.cancel().catch(() => undefined);
      return;
    }
    const error = await httpErrorFrom("ACP POST failed", response);
    if (FATAL_STATUSES.has(error.status) || key === undefined) throw this.fail(connectionError(error));
    // Only this request failed; the connection stays usable.
    if (this.pending.delete(key)) this.deliver(syntheticError(message as AnyRequest, error), undefined);
  }

  private sessionFor(message: AnyMessage): string | undefined {
    if (!this.options.sessionStreams) return undefined;
    if (isResponse(message)) {
      const key = idKey(message.id);
      const sessionId = this.inboundRequestSessions.get(key);
      this.inboundRequestSessions.delete(key);
      return sessionId;
    }
    return paramsSessionId(message);
  }

  // ---- SSE ---------------------------------------------------------------

  private ensureSessionStream(sessionId: string): Promise<void> {
    let ready = this.sessionStreams.get(sessionId);
    if (!ready) {
      ready = new Promise<void>((resolve) => void this.runSse(sessionId, resolve));
      this.sessionStreams.set(sessionId, ready);
    }
    return ready;
  }

  /**
   * Keeps one SSE GET alive (reconnecting) until the stream closes or the connection is lost.
   * `onOpen`: once the first GET is answered 200 (for a session stream, also when it is refused).
   */
  private async runSse(
    sessionId: string | undefined,
    onOpen?: () => void,
    lastEventId?: string,
  ): Promise<void> {
    const cursor: SseCursor = { lastEventId, retryMs: undefined };
    let failures = 0;
    let previous: SseOutcome | undefined;
    while (!this.isClosed) {
      let outcome: SseOutcome | undefined;
      try {
        outcome = await this.readSseOnce(sessionId, cursor, onOpen);
      } catch (error) {
        // Session messages must not wait forever on a stream the server refuses.
        if (sessionId !== undefined) onOpen?.();
        if (this.isClosed) return;
        if (error instanceof AcpHttpError && FATAL_STATUSES.has(error.status)) {
          this.fail(connectionError(error));
          return;
        }
      }
      if (this.isClosed) return;
      if (outcome && previous?.clean && isEndedStream(outcome)) {
        this.endStream(sessionId);
        return;
      }
      previous = outcome;
      failures = outcome && isHealthy(outcome) ? 1 : failures + 1;
      if (failures > this.options.reconnect.maxAttempts) {
        this.fail(
          new AcpConnectionLostError(`SSE stream could not be re-established after ${failures - 1} attempts`),
        );
        return;
      }
      await sleep(this.reconnectDelay(cursor, failures), this.abort.signal);
    }
  }

  /**
   * The server ended the stream on purpose and has nothing more for us: the
   * connection is over (e.g. the agent exited); a session stream just stops.
   */
  private endStream(sessionId: string | undefined): void {
    if (sessionId === undefined) this.fail(new AcpConnectionLostError("the server ended the event stream"));
    else this.sessionStreams.delete(sessionId);
  }

  /** One GET. Throws when it was not answered 200; otherwise says how the body ended. */
  private async readSseOnce(
    sessionId: string | undefined,
    cursor: SseCursor,
    onOpen?: () => void,
  ): Promise<SseOutcome> {
    const headers: Record<string, string> = {
      Accept: "text/event-stream",
      ...connectionHeaders(this.connectionId!),
    };
    if (sessionId !== undefined) headers[SESSION_HEADER] = sessionId;
    if (cursor.lastEventId !== undefined) headers["Last-Event-ID"] = cursor.lastEventId;
    const response = await this.send("GET", headers, undefined, undefined);
    if (!response.ok) throw await httpErrorFrom("ACP SSE GET failed", response);
    if (!response.body) throw new Error("acp-http-client: SSE response has no body");
    onOpen?.();
    const outcome: SseOutcome = { openedAt: Date.now(), endedAt: 0, delivered: false, clean: true };
    await consumeSse(
      response.body,
      {
        onEvent: (event) => void (this.onSseEvent(event, cursor, sessionId) && (outcome.delivered = true)),
        onRetry: (ms) => void (cursor.retryMs = ms),
      },
      this.options.sseIdleTimeoutMs,
    ).catch(() => void (outcome.clean = false));
    outcome.endedAt = Date.now();
    return outcome;
  }

  private reconnectDelay(cursor: SseCursor, failures: number): number {
    const { initialDelayMs, factor, maxDelayMs } = this.options.reconnect;
    return Math.min((cursor.retryMs ?? initialDelayMs) * factor ** (failures - 1), maxDelayMs);
  }

  /** Returns true when the event carried a new message. */
  private onSseEvent(event: EventSourceMessage, cursor: SseCursor, sessionId: string | undefined): boolean {
    if (this.isClosed) return false;
    const eventId = event.id === "" ? undefined : event.id;
    if (eventId !== undefined) cursor.lastEventId = eventId;
    const delivered = this.onSseData(event.data, eventId, sessionId);
    if (eventId !== undefined && sessionId === undefined && !this.isClosed && this.options.onEventId)
      callSafely(this.options.onEventId, eventId);
    return delivered;
  }

  private onSseData(data: string, eventId: string | undefined, sessionId: string | undefined): boolean {
    // Priming and keep-alive events carry no message. Their ids only move the
    // cursor: a priming id may name a message still in flight on another stream.
    if (data.trim() === "") return false;
    if (eventId !== undefined && !this.rememberEventId(eventId)) return false;
    const message = parseMessage(data);
    if (!message) {
      this.fail(new Error(`acp-http-client: SSE event is not a JSON-RPC message: ${data.slice(0, 200)}`));
      return false;
    }
    if (isResponse(message) && !this.pending.delete(idKey(message.id))) {
      // Another client's request on this connection, or one this client stopped waiting for.
      this.observe({
        direction: "inbound",
        message,
        ...(eventId !== undefined ? { eventId } : {}),
        unmatched: true,
      });
      return true;
    }
    if (sessionId !== undefined && isRequest(message))
      this.inboundRequestSessions.set(idKey(message.id), sessionId);
    this.deliver(message, eventId);
    return true;
  }

  /** False when the id was seen before (a replayed duplicate). */
  private rememberEventId(id: string): boolean {
    if (this.seenEventIds.has(id)) return false;
    this.seenEventIds.add(id);
    if (this.seenEventIds.size > MAX_REMEMBERED_EVENT_IDS) {
      const oldest = this.seenEventIds.values().next().value;
      if (oldest !== undefined) this.seenEventIds.delete(oldest);
    }
    return true;
  }

  private observe(envelope: AcpEnvelope): void {
    if (this.options.onEnvelope) callSafely(this.options.onEnvelope, envelope);
  }

  private deliver(wireMessage: AnyMessage, eventId: string | undefined): void {
    if (this.isClosed) return;
    const message = this.fromWire(wireMessage);
    this.observe(
      eventId === undefined ? { direction: "inbound", message } : { direction: "inbound", message, eventId },
    );
    const sessionId =
      this.options.sessionStreams && isResponse(message) ? resultSessionId(message) : undefined;
    if (sessionId !== undefined) void this.ensureSessionStream(sessionId);
    this.controller.enqueue(message);
  }

  // ---- HTTP & lifecycle --------------------------------------------------

  private send(
    method: string,
    headers: Record<string, string>,
    body: string | undefined,
    timeoutMs: number | undefined,
  ): Promise<Response> {
    const all: Record<string, string> = { ...this.options.headers, ...headers };
    if (body !== undefined) {
      all["Content-Type"] = "application/json";
      all.Accept = "application/json, text/event-stream";
    }
    if (this.protocolVersion !== undefined) all["Acp-Protocol-Version"] = String(this.protocolVersion);
    const signal =
      timeoutMs === undefined
        ? this.abort.signal
        : AbortSignal.any([this.abort.signal, AbortSignal.timeout(timeoutMs)]);
    return this.options.fetch(this.options.url, { method, headers: all, body, signal });
  }

  private async deleteConnection(connectionId: string): Promise<void> {
    const headers = { ...this.options.headers, ...connectionHeaders(connectionId) };
    const response = await this.options
      .fetch(this.options.url, { method: "DELETE", headers, signal: AbortSignal.timeout(5_000) })
      .catch(() => undefined);
    await response?.body?.cancel().catch(() => undefined);
  }

  /** `keepConnection`: end only this stream (detach), not the server's connection. */
  private close(keepConnection = false): Promise<void> {
    if (this.closing) return this.closing;
    const wasOpen = !this.isClosed;
    this.shutdown();
    const connectionId = this.connectionId;
    const end = wasOpen && connectionId !== undefined && !keepConnection;
    this.closing = (end ? this.deleteConnection(connectionId) : Promise.resolve()).then(() => {
      try {
        this.controller.close();
      } catch {
        // already errored or closed
      }
      this.resolveClosed({ kind: "closed" });
    });
    return this.closing;
  }

  /** Ends the stream with an error; returns it so callers can `throw this.fail(...)`. */
  private fail(error: Error): Error {
    if (this.isClosed) return error;
    this.shutdown();
    this.failure = error;
    const gone =
      error instanceof AcpConnectionLostError &&
      error.cause instanceof AcpHttpError &&
      error.cause.connectionLost;
    if (this.connectionId !== undefined && !gone && !this.attaching)
      void this.deleteConnection(this.connectionId);
    this.controller.error(error);
    this.resolveClosed({ kind: "error", error });
    return error;
  }

  private shutdown(): void {
    this.isClosed = true;
    this.abort.abort();
    this.pending.clear();
  }
}

/** Both names of the connection header, same value: ACP's and the sandbox-agent contract's. */
function connectionHeaders(connectionId: string): Record<string, string> {
  return { [CONNECTION_HEADER]: connectionId, [X_CONNECTION_HEADER]: connectionId };
}

function connectionError(error: AcpHttpError): AcpConnectionLostError {
  return new AcpConnectionLostError(error.message, { cause: error });
}

/**
 * A request's failed POST as its JSON-RPC error. The problem's own members (`reason`,
 * `reachedAgent`…) are lifted into `data`, as the WebSocket transport's errors carry them, so that
 * callers read one shape whichever transport refused the request.
 */
function syntheticError(request: AnyRequest, error: AcpHttpError): AnyMessage {
  const { type: _type, title: _title, status: _status, detail: _detail, ...members } = error.problem ?? {};
  return {
    jsonrpc: "2.0",
    id: request.id,
    error: {
      code: -32603,
      message: error.message,
      data: { ...members, status: error.status, problem: error.problem, body: error.body },
    },
  };
}

function asError(error: unknown, context: string): Error {
  const cause = error instanceof Error ? error : new Error(String(error));
  return new AcpConnectionLostError(`${context}: ${cause.message}`, { cause });
}

/** Whether a fetch failed because nothing listened at the address (`ECONNREFUSED` anywhere in its causes). */
function isConnectionRefused(error: unknown): boolean {
  for (let e = error, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    if (typeof e === "object" && "code" in e && e.code === "ECONNREFUSED") return true;
    e = typeof e === "object" && "cause" in e ? e.cause : undefined;
  }
  return false;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}
