import { PROTOCOL_VERSION, type AnyMessage } from "@agentclientprotocol/sdk";

export interface ReconnectOptions {
  /** First delay when the server sent no `retry:` (ms). Default 1000. */
  initialDelayMs?: number;
  /** Upper bound for any delay (ms). Default 30000. */
  maxDelayMs?: number;
  /** Growth per failed attempt. Default 1.5. */
  factor?: number;
  /** Consecutive failed attempts before the connection is declared lost. Default 8. */
  maxAttempts?: number;
}

/** One JSON-RPC message crossing the transport, for observers. */
export interface AcpEnvelope {
  direction: "inbound" | "outbound";
  message: AnyMessage;
  /** SSE event id the message arrived with, if any. */
  eventId?: string;
  /**
   * An inbound response this client is not waiting for: the answer to a request another client
   * sent on the same connection (one that attached before this one, see `attach`), or a late
   * answer to a request this client stopped waiting for. Observers see it; the client app does not.
   */
  unmatched?: true;
}

/** An existing connection to continue (see `AcpHttpStream.attach`). */
export interface AcpAttachTarget {
  /** The server's connection id (`Acp-Connection-Id` of its `initialize` answer). */
  connectionId: string;
  /** The protocol version negotiated by that connection's `initialize`. */
  protocolVersion: number;
  /** Resume the event stream after this SSE event id (`Last-Event-ID`); without it, only new events. */
  lastEventId?: string | null;
}

export interface AcpHttpStreamOptions {
  /** Server origin (and optional base path), e.g. `http://127.0.0.1:2468`. */
  baseUrl: string | URL;
  /** Sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** Custom fetch (proxies, test hooks, non-global runtimes). */
  fetch?: typeof fetch;
  /** RPC endpoint path, resolved against `baseUrl`. Default `/v2/rpc`. */
  path?: string;
  /** Aborting closes the stream (DELETE included). */
  signal?: AbortSignal;
  /** Max time for the initialize POST (ms). Default 60000. */
  initializeTimeoutMs?: number;
  /** Max time for any other POST to be accepted (ms). Default 30000. */
  postTimeoutMs?: number;
  /** Reconnect an SSE stream that sends nothing, not even keep-alives, this long (ms; 0 = never). Default 45000. */
  sseIdleTimeoutMs?: number;
  /** SSE reconnect policy. The server's `retry:` replaces `initialDelayMs`. */
  reconnect?: ReconnectOptions;
  /**
   * Open one extra SSE GET per session (`Acp-Session-Id`), as the ACP RFD
   * routes session traffic there (the SDK's `AcpServer` does). Servers that
   * deliver everything on the connection stream answer it with an idle stream.
   * Default true.
   */
  sessionStreams?: boolean;
  /** Protocol versions this client accepts from `initialize`. Default `[PROTOCOL_VERSION]`. */
  protocolVersions?: readonly number[];
  /** Sees every message sent and received, before the SDK does. */
  onEnvelope?: (envelope: AcpEnvelope) => void;
  /**
   * Called with the id of every event of the connection stream, in order, after its message (if
   * any) was delivered, priming events included: the `Last-Event-ID` to resume from elsewhere.
   */
  onEventId?: (eventId: string) => void;
}

export interface ResolvedOptions {
  url: URL;
  headers: Record<string, string>;
  fetch: typeof fetch;
  initializeTimeoutMs: number;
  postTimeoutMs: number;
  sseIdleTimeoutMs: number;
  reconnect: Required<ReconnectOptions>;
  sessionStreams: boolean;
  protocolVersions: readonly number[];
  onEnvelope: ((envelope: AcpEnvelope) => void) | undefined;
  onEventId: ((eventId: string) => void) | undefined;
}

export function resolveOptions(options: AcpHttpStreamOptions): ResolvedOptions {
  const base = new URL(String(options.baseUrl));
  const path = options.path ?? "/v2/rpc";
  // Keep a base path such as `/proxy/` in front of the rpc path.
  const url = new URL(base.pathname.replace(/\/$/, "") + (path.startsWith("/") ? path : `/${path}`), base);
  const headers: Record<string, string> = { ...options.headers };
  if (options.token !== undefined) headers.Authorization = `Bearer ${options.token}`;
  const fetchImpl = options.fetch ?? globalThis.fetch;
  if (typeof fetchImpl !== "function")
    throw new TypeError("acp-http-client: no fetch implementation available");
  return {
    url,
    headers,
    fetch: (input, init) => fetchImpl(input, init),
    initializeTimeoutMs: options.initializeTimeoutMs ?? 60_000,
    postTimeoutMs: options.postTimeoutMs ?? 30_000,
    sseIdleTimeoutMs: options.sseIdleTimeoutMs ?? 45_000,
    reconnect: {
      initialDelayMs: options.reconnect?.initialDelayMs ?? 1_000,
      maxDelayMs: options.reconnect?.maxDelayMs ?? 30_000,
      factor: options.reconnect?.factor ?? 1.5,
      maxAttempts: options.reconnect?.maxAttempts ?? 8,
    },
    sessionStreams: options.sessionStreams ?? true,
    protocolVersions: options.protocolVersions ?? [PROTOCOL_VERSION],
    onEnvelope: options.onEnvelope,
    onEventId: options.onEventId,
  };
}
