import type { AgentExit } from "./agent-process.js";
import type { JsonRpcMessage } from "../protocol.js";

/** What an extension may do with the connection it is attached to. */
export interface ConnectionApi {
  readonly id: string;
  readonly agentId: string;
  /** Sessions the agent created, loaded, resumed or forked on this connection. */
  readonly sessionIds: ReadonlySet<string>;
  /** Sends a server-originated message to the client on the SSE stream, in order with agent output. */
  emit(message: JsonRpcMessage): void;
  /** Writes a message to the agent's stdin, in order with client messages. */
  forward(message: JsonRpcMessage): Promise<void>;
  /**
   * Sends a server-originated request to the agent (written at once, in order with client
   * messages) and resolves with its response, which the client never sees. Resolves with a
   * -32603 error response if the agent exits first.
   */
  request(method: string, params: unknown): Promise<JsonRpcMessage>;
  /** Removes a session from `sessionIds` (it ended), so no `session/ended` is sent for it on agent exit. */
  forgetSession(sessionId: string): void;
  /** Ends the connection (agent process terminated). */
  close(reason: string): Promise<void>;
}

/**
 * Hooks through which Sandbox extensions (`_sandboxagent/*`, `_meta["sandboxagent.dev"]`) observe
 * and adjust traffic. Everything no hook claims is forwarded verbatim.
 */
export interface ConnectionExtension {
  /**
   * Sees the client's `initialize` request before the agent does. Returning true means the
   * request object was changed and is forwarded re-serialized (e.g. capabilities added).
   */
  initializeRequest?(request: JsonRpcMessage, conn: ConnectionApi): boolean;
  /** Adjusts the agent's `initialize` result before the client sees it (e.g. capability advertisement). */
  initializeResult?(result: Record<string, unknown>, conn: ConnectionApi): void;
  /** Sees every client message first; returning true means the extension answered it and it is not forwarded. */
  clientMessage?(message: JsonRpcMessage, conn: ConnectionApi): boolean | Promise<boolean>;
  /**
   * Whether `clientMessage` or `agentResponse` read more of a client request with this method
   * than its `jsonrpc`, `id` and `method`. When no extension does, the transport need not parse
   * the request (transport/envelope.ts): the hooks then get `{ jsonrpc, id, method }`, without
   * `params`. An extension with either hook and without this one gets every message parsed.
   * The answer must depend on the method alone: a connection remembers the last method nothing reads.
   */
  readsParams?(method: string): boolean;
  /**
   * Sees the agent's response to a client request (`request` is what the client sent). Returning
   * true means the response object was changed and must be re-serialized; `"held"` means the
   * extension delivers the answer itself later (`emit`), e.g. after requests of its own.
   */
  agentResponse?(response: JsonRpcMessage, request: JsonRpcMessage, conn: ConnectionApi): boolean | "held";
  /**
   * Whether `agentResponse` acts on a successful answer to `request` (what the client sent). An
   * answer that every extension with `agentResponse` says no to here may reach the client without
   * being parsed, and without `agentResponse` (`agent-answer.ts`); an extension with
   * `agentResponse` and without this hook sees every answer, parsed.
   */
  readsAgentResult?(request: JsonRpcMessage): boolean;
  /**
   * Sees agent notifications and requests. Returning true drops the message: the client never
   * sees it (for a request, the extension must answer it with `forward`).
   */
  agentMessage?(message: JsonRpcMessage, conn: ConnectionApi): boolean | void;
  /**
   * Sees a text-chunk `session/update` (`agent_message_chunk` and the like) that the connection
   * recognised without parsing it (see `content-chunk.ts`); returning true drops it. Such lines
   * skip `agentMessage` only when every extension with an `agentMessage` hook also has this one.
   */
  agentTextChunk?(sessionId: string, conn: ConnectionApi): boolean | void;
  /**
   * Called once when the connection's sessions end: the agent exited (`exit` set, before
   * `_sandboxagent/session/ended` is sent) or the connection was closed (DELETE, expiry, shutdown).
   */
  sessionsEnded?(conn: ConnectionApi, exit: AgentExit | undefined): void;
  /**
   * After a server restart, a session was re-attached to the connection's new agent process
   * (`result`: the agent's answer to the server's `session/load` or `session/resume`). Awaited
   * before the client's request that started the agent is sent to it, so requests the extension
   * makes here (`request`) reach the agent first.
   */
  sessionReattached?(sessionId: string, result: unknown, conn: ConnectionApi): Promise<void> | void;
  /**
   * The connection is gone for good (DELETE, expiry, an end past its retention, a failed
   * initialize; or, after a restart, a connection whose event log was missing): state the
   * extension keeps for it, in memory or in the store's index, is dropped. Not called when a
   * durable server shuts down, since the connection comes back with the next run.
   */
  connectionClosed?(connectionId: string): void;
  /** What the extension knows about a session (title, model, counts…), for the connection list. */
  describeSession?(sessionId: string, conn: ConnectionApi): SessionDescription | undefined;
}

/** A session as the connection list (`GET /v2/connections`) shows it: plain data, a copy. */
export interface SessionDescription {
  sessionId: string;
  title: string | null;
  cwd: string | null;
  model: string | null;
  /** ISO 8601; null when no extension recorded the session. */
  createdAt: string | null;
  updatedAt: string | null;
  ended: boolean;
  /** `session/update` notifications the agent sent for the session. */
  eventCount: number;
  /** Client metadata (`_meta["sandboxagent.dev"]` of session/new, `set_metadata`). */
  metadata: Record<string, unknown>;
}
