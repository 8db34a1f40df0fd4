/** Opens the single agent connection of a client on top of `acp-http-client` and converts its traffic to events. */
import {
  PROTOCOL_VERSION,
  type InitializeResponse,
  type SessionNotification,
} from "@agentclientprotocol/sdk";
import {
  AcpConnectionLostError,
  AcpHttpClient,
  AcpHttpError,
  AcpRpcError,
  type AcpAttachTarget,
  type AcpEnvelope,
  type WebSocketConstructor,
} from "acp-http-client";
import { AgentRequestError, NotConnectedError, SandboxAgentHttpError } from "./errors.js";
import type { EventHub, SandboxAgentEvent, TurnEndedEvent } from "./events.js";
import type { HttpTransport } from "./http.js";
import { META_KEY, isRecord, metadataOf } from "./metadata.js";
import { loadNodeWebSocket } from "./terminal.js";
import type { PermissionDecision, PermissionHandler, PermissionRequest, StopReason } from "./types.js";
import { VERSION } from "./version.js";

const ENDED_METHOD = "_sandboxagent/session/ended";
const UNPARSED_METHOD = "_sandboxagent/agent/unparsed";
const UPDATE_METHOD = "session/update";
const PERMISSION_METHOD = "session/request_permission";
const RPC_PATH = "/v2/rpc";

export interface OpenConnectionOptions {
  http: HttpTransport;
  agent: string;
  events: EventHub;
  onPermissionRequest: PermissionHandler | undefined;
  connectTimeoutMs: number | undefined;
  requestTimeoutMs: number | undefined;
  onEnvelope: ((envelope: AcpEnvelope) => void) | undefined;
  /** Continue this connection (another client's) instead of initializing a new one. */
  attach?: AcpAttachTarget;
  /** Called with every stream position (see `AcpHttpStreamOptions.onEventId`). */
  onEventId?: (eventId: string) => void;
  /**
   * Sees every message first; returning false means another client reported it already (a replay
   * after a takeover), so it is not turned into an event again.
   */
  observe?: (envelope: AcpEnvelope) => boolean;
  /** The agent session whose turn an unmatched prompt answer ends (an earlier client's turn). */
  adoptedSession?: () => string | null;
  transport: "http" | "websocket" | undefined;
  WebSocket: WebSocketConstructor | undefined;
}

export interface OpenConnection {
  readonly rpc: AcpHttpClient;
  /** Undefined for an attached connection (another client initialized it). */
  readonly initializeResult: InitializeResponse | undefined;
}

const CANCEL_ALL: PermissionHandler = () => ({ outcome: "cancelled" });

/** Connects (handshake included); rejects with `SandboxAgentHttpError` or `AgentRequestError` on refusal. */
export async function openConnection(options: OpenConnectionOptions): Promise<OpenConnection> {
  const rpc = new AcpHttpClient({
    name: "sandbox-agent",
    baseUrl: options.http.baseUrl,
    headers: options.http.headers(),
    fetch: options.http.fetch,
    // The sandbox-agent server carries every session on the connection stream.
    sessionStreams: false,
    initializeTimeoutMs: options.connectTimeoutMs,
    requestTimeoutMs: options.requestTimeoutMs,
    ...(options.onEventId ? { onEventId: options.onEventId } : {}),
    transport: options.transport,
    WebSocket:
      options.transport === "websocket"
        ? (options.WebSocket ?? ((await loadNodeWebSocket()) as WebSocketConstructor | undefined))
        : undefined,
  });
  if (options.onEnvelope) rpc.onEnvelope(options.onEnvelope);
  rpc.onEnvelope((envelope) => {
    if (options.observe?.(envelope) === false) return;
    forwardNotification(envelope, options.events);
    const ended = adoptedTurnEnd(envelope, options.adoptedSession?.() ?? null);
    if (ended) options.events.emit(ended);
  });
  const handler = options.onPermissionRequest ?? CANCEL_ALL;
  rpc.onRequest(PERMISSION_METHOD, async (params, { signal }) => {
    const request: PermissionRequest = {
      sessionId: params.sessionId,
      toolCall: params.toolCall,
      options: params.options,
    };
    options.events.emit({ type: "permission", request });
    const outcome: PermissionDecision = await handler(request, { signal });
    return { outcome };
  });
  try {
    if (options.attach) {
      await rpc.attach(options.attach);
      return { rpc, initializeResult: undefined };
    }
    const initializeResult = await rpc.initialize({
      protocolVersion: PROTOCOL_VERSION,
      clientCapabilities: {},
      clientInfo: { name: "sandbox-agent", version: VERSION },
      _meta: { [META_KEY]: { agent: options.agent } },
    });
    return { rpc, initializeResult };
  } catch (error) {
    // A failed attach must leave the connection to the client that reads it: close() would DELETE it.
    await (options.attach ? rpc.detach() : rpc.close()).catch(() => undefined);
    throw convertError("connect", error, options.http.url(RPC_PATH));
  }
}

function forwardNotification(envelope: AcpEnvelope, events: EventHub): void {
  const message = envelope.message;
  if (envelope.direction !== "inbound" || !("method" in message) || ("id" in message && message.id != null))
    return;
  events.emit(toEvent(message.method, "params" in message ? message.params : undefined));
}

/**
 * The end of an earlier client's turn on a taken-over connection: its prompt's answer arrives
 * unmatched; `stopReason` is what only a prompt's answer carries (ACP `PromptResponse`).
 */
export function adoptedTurnEnd(envelope: AcpEnvelope, sessionId: string | null): TurnEndedEvent | undefined {
  const message = envelope.message;
  if (!envelope.unmatched || sessionId === null || !("result" in message) || !isRecord(message.result))
    return undefined;
  const stopReason = message.result.stopReason;
  return typeof stopReason === "string"
    ? { type: "turnEnded", sessionId, stopReason: stopReason as StopReason }
    : undefined;
}

/** Maps one notification to its event; unknown methods become `notification` events. */
export function toEvent(method: string, params: unknown): SandboxAgentEvent {
  if (!isRecord(params)) return { type: "notification", method, params };
  switch (method) {
    case UPDATE_METHOD: {
      const { sessionId, update } = params as unknown as SessionNotification;
      // Sandbox metadata may ride on the notification or on the update itself.
      return {
        type: "update",
        sessionId,
        update,
        metadata: { ...metadataOf(params), ...metadataOf(update) },
      };
    }
    case ENDED_METHOD:
      return {
        type: "ended",
        ...(typeof params.sessionId === "string" ? { sessionId: params.sessionId } : {}),
        reason: typeof params.reason === "string" ? params.reason : "unknown",
        exitCode: typeof params.exitCode === "number" ? params.exitCode : null,
        signal: typeof params.signal === "string" ? params.signal : null,
        stderrTail: typeof params.stderrTail === "string" ? params.stderrTail : "",
        ...(typeof params.closed === "boolean" ? { closed: params.closed } : {}),
      };
    case UNPARSED_METHOD:
      return {
        type: "parseError",
        line: typeof params.line === "string" ? params.line : "",
        truncated: params.truncated === true,
        error: typeof params.error === "string" ? params.error : "",
      };
    default:
      return {
        type: "notification",
        method,
        params,
        ...(typeof params.sessionId === "string" ? { sessionId: params.sessionId } : {}),
      };
  }
}

/** Translates transport and protocol errors into this SDK's error types. */
export function convertError(operation: string, error: unknown, rpcUrl: string): unknown {
  if (error instanceof AcpRpcError) {
    return new AgentRequestError(operation, error.code, error.message, error.data, { cause: error });
  }
  if (error instanceof AcpHttpError) {
    return new SandboxAgentHttpError({
      method: "POST",
      url: rpcUrl,
      status: error.status,
      body: error.body,
      problem: error.problem,
    });
  }
  if (error instanceof AcpConnectionLostError) {
    return new NotConnectedError(`${operation} failed: ${error.message}`, { cause: error });
  }
  return error;
}
