import type * as proto from "@agentclientprotocol/sdk";
import { PROTOCOL_VERSION } from "@agentclientprotocol/sdk";
import type { SessionStore } from "@sandbox-agent/session-store";
import type { AcpEnvelope, AcpHttpClient } from "acp-http-client";
import { BoundSession } from "./bound-session.js";
import {
  ControlPlane,
  type AgentDescription,
  type HealthStatus,
  type InstallAgentOptions,
  type InstallResult,
} from "./control-plane.js";
import { convertError, openConnection, type OpenConnection } from "./connection.js";
import {
  agentInfo,
  metaField,
  metadataResult,
  modelList,
  promptBlocks,
  sessionList,
  sessionState,
} from "./convert.js";
import { AgentRequestError, AlreadyConnectedError, NotConnectedError } from "./errors.js";
import {
  EventHub,
  type EventFilter,
  type EventOfType,
  type DisconnectedEvent,
  type EventStreamOptions,
  type SandboxAgentEvent,
  type SandboxAgentEventType,
} from "./events.js";
import { FileSystem } from "./filesystem.js";
import { HttpTransport, type FetchLike } from "./http.js";
import { Processes } from "./processes.js";
import type { WebSocketConstructor } from "./terminal.js";
import { Connections } from "./connections.js";
import { metadataOf } from "./metadata.js";
import type {
  AgentInfo,
  ForkSessionOptions,
  ListSessionsOptions,
  LoadSessionOptions,
  ModelList,
  NewSessionOptions,
  PermissionHandler,
  PromptOptions,
  PromptResult,
  SessionConfigOption,
  SessionList,
  SessionMetadata,
  SessionState,
} from "./types.js";

export interface SandboxAgentClientOptions {
  /** Server origin, e.g. `http://127.0.0.1:2468`. */
  baseUrl: string;
  /** Bearer token, when the server was started with `--token`. */
  token?: string;
  /** Id of the agent to run for this client's connection (e.g. `"claude"`, `"mock"`). */
  agent: string;
  /** Connect in the constructor (default true). Session calls made meanwhile wait for it. */
  autoConnect?: boolean;
  /** Decides the agent's permission requests; without one every request is cancelled. */
  onPermissionRequest?: PermissionHandler;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  fetch?: FetchLike;
  /** Max time for `connect()` (ms, default 60000). */
  connectTimeoutMs?: number;
  /** Default max time for each session call (ms, default none: prompts may run long). */
  requestTimeoutMs?: number;
  /**
   * Observes every JSON-RPC message of the agent connection in both directions, in wire order,
   * with the SSE event id it arrived with (inspectors, debugging, logs).
   */
  onEnvelope?: (envelope: AcpEnvelope) => void;
  /**
   * A shared store (`@sandbox-agent/session-store`) this client records its session in, so that any
   * replica of the application can find the session, follow its events (`followSession`) and take
   * its connection over (`SandboxAgentClient.reattach`). Needs `sessionId`.
   */
  store?: SessionStore;
  /**
   * With `store`: the session's id there (your chat's id; not the agent's session id, which is
   * `agentSessionId`). `connect()` takes over the connection it records, or opens one and records it.
   */
  sessionId?: string;
  /** With `store`, for a session not recorded yet: the key of the sandbox it runs in. */
  sandboxKey?: string;
  /**
   * The id of a connection the server already runs (another client's, see `connections.list()`):
   * `connect()` attaches to it instead of starting an agent. Its event stream has one reader at a
   * time: while another client reads it the server refuses this one (409) and `connect()` fails.
   */
  attach?: string;
  /** Errors of the background work for `store` (writing the mirror); default `console.warn`. */
  onStoreError?: (error: Error) => void;
  /**
   * How the agent connection travels: `"http"` (default) POSTs and an SSE stream; `"websocket"`
   * one WebSocket to `/v2/rpc` (one message per frame, resumed after a drop from the last event
   * received). With a token, the socket authenticates with a single-use ticket.
   */
  transport?: "http" | "websocket";
  /** WebSocket implementation for `transport: "websocket"`. Default: `ws` in Node, the global one elsewhere. */
  WebSocket?: WebSocketConstructor;
}

/** What `SandboxAgentClient.reattach` needs: the server address and agent come from the store. */
export interface ReattachOptions extends Omit<
  SandboxAgentClientOptions,
  "baseUrl" | "agent" | "autoConnect" | "store" | "sessionId"
> {
  store: SessionStore;
  sessionId: string;
  /** Default: the endpoint recorded for the session's sandbox. */
  baseUrl?: string;
  /** Default: the agent recorded for the session. */
  agent?: string;
}

const METHOD_NOT_FOUND = -32601;
const ENDED_GRACE_MS = 100;
const AGENT_EXITED = "agent_exited";
const EXT = "_sandboxagent/session/";

/**
 * Client of a sandbox-agent server: control-plane helpers (health, agents, files) plus at most one
 * live agent connection, through which sessions are created and prompted.
 */
export class SandboxAgentClient {
  readonly baseUrl: string;
  readonly agent: string;
  /** Files inside the sandbox. */
  readonly fs: FileSystem;
  /** Processes and terminals inside the sandbox; need no agent connection. */
  readonly processes: Processes;
  /** The server's agent connections, whoever opened them (read-only); need no agent connection. */
  readonly connections: Connections;
  private readonly http: HttpTransport;
  private readonly control: ControlPlane;
  private readonly hub = new EventHub();
  private readonly options: SandboxAgentClientOptions;
  private connection: OpenConnection | undefined;
  /** A connection whose agent exited: unusable, closed after a short grace for its last events. */
  private ending: OpenConnection | undefined;
  private connecting: Promise<void> | undefined;
  private lastConnectError: unknown;
  /** Known config options per session, so `setSessionModel` can fall back to the model option. */
  private readonly configOptions = new Map<string, SessionConfigOption[]>();
  private readonly bound: BoundSession | undefined;

  /**
   * A connected client for a session recorded in `store` by any replica: the server address
   * (the endpoint recorded for its sandbox) and the agent come from the store, and the recorded
   * connection is taken over where the mirror stops (see `connect()`).
   */
  static async reattach(options: ReattachOptions): Promise<SandboxAgentClient> {
    const { store, sessionId } = options;
    const record = await store.sessions.get(sessionId);
    if (!record) throw new TypeError(`SandboxAgentClient.reattach: no session "${sessionId}" in the store`);
    const baseUrl = options.baseUrl ?? (await store.sandboxes.get(record.sandboxKey))?.endpoint;
    if (!baseUrl) {
      throw new TypeError(
        `SandboxAgentClient.reattach: sandbox "${record.sandboxKey}" of session "${sessionId}" has no ` +
          "recorded endpoint: resume it (fleet.getOrCreate) or pass baseUrl",
      );
    }
    const client = new SandboxAgentClient({
      ...options,
      baseUrl,
      agent: options.agent ?? record.agent,
      sandboxKey: record.sandboxKey,
      autoConnect: false,
    });
    await client.connect();
    return client;
  }

  constructor(options: SandboxAgentClientOptions) {
    if (!options.agent) throw new TypeError("SandboxAgentClient: `agent` is required");
    if ((options.store === undefined) !== (options.sessionId === undefined))
      throw new TypeError("SandboxAgentClient: `store` and `sessionId` go together");
    this.options = options;
    if (options.store && options.sessionId !== undefined) {
      this.bound = new BoundSession({
        store: options.store,
        sessionId: options.sessionId,
        sandboxKey: options.sandboxKey,
        agent: options.agent,
        onError: options.onStoreError ?? ((error) => console.warn(`sandbox-agent: ${error.message}`)),
      });
    }
    this.http = new HttpTransport(options);
    this.baseUrl = this.http.baseUrl;
    this.agent = options.agent;
    this.fs = new FileSystem(this.http);
    this.processes = new Processes(this.http);
    this.connections = new Connections(this.http);
    this.control = new ControlPlane(this.http);
    this.hub.subscribe({ types: ["update"] }, (event) => this.trackConfig(event));
    this.hub.subscribe({ types: ["ended"] }, (event) => {
      if (event.type === "ended" && event.reason === AGENT_EXITED) this.agentEnded();
    });
    if (options.autoConnect !== false) {
      // The failure is kept for the NotConnectedError of later calls (see connectFailed).
      this.connect().catch(() => undefined);
    }
  }

  // ---- lifecycle ---------------------------------------------------------------------------

  /** True while the agent connection is open. */
  get connected(): boolean {
    return this.connection !== undefined;
  }

  /** The server's id of this client's agent connection, once connected. */
  get connectionId(): string | undefined {
    return this.connection?.rpc.connectionId;
  }

  /**
   * What the connected agent supports; undefined when not connected, or when this client took over
   * a connection another client initialized.
   */
  get agentInfo(): AgentInfo | undefined {
    const init = this.connection?.initializeResult;
    return init ? agentInfo(init) : undefined;
  }

  /** With a store: the agent session recorded for this client's session (null until there is one). */
  get agentSessionId(): string | null {
    return this.bound?.agentSessionId ?? null;
  }

  /** Opens the agent connection. Throws `AlreadyConnectedError` if one is open or opening. */
  connect(): Promise<void> {
    if (this.connection || this.connecting) return Promise.reject(new AlreadyConnectedError());
    this.lastConnectError = undefined;
    const attempt = this.open()
      .catch((error: unknown) => {
        this.connectFailed(error);
        throw error;
      })
      .finally(() => {
        if (this.connecting === attempt) this.connecting = undefined;
      });
    this.connecting = attempt;
    return attempt;
  }

  /**
   * Closes the agent connection (its agent process stops). No-op when not connected. With a store,
   * the mirror's last events are written first and the record forgets the connection.
   */
  async disconnect(): Promise<void> {
    await this.connecting?.catch(() => undefined);
    const connection = this.connection ?? this.ending;
    if (!connection) return;
    await this.bound?.close(true).catch((error: Error) => this.options.onStoreError?.(error));
    this.dropConnection(connection);
    await connection.rpc.close().catch(() => undefined);
  }

  /**
   * Stops following the agent connection without ending it: the agent keeps running, and another
   * client (another replica, with `reattach`) takes the connection over. With a store, the mirror's
   * last events are written first.
   */
  async release(): Promise<void> {
    await this.connecting?.catch(() => undefined);
    const connection = this.connection;
    if (!connection) return;
    await this.bound?.close(false);
    this.dropConnection(connection);
    await connection.rpc.detach().catch(() => undefined);
  }

  /** Disconnects and ends every event iterator. */
  async dispose(): Promise<void> {
    await this.disconnect();
    this.hub.endStreams();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.dispose();
  }

  private async open(): Promise<void> {
    const options = {
      http: this.http,
      agent: this.agent,
      events: this.hub,
      onPermissionRequest: this.options.onPermissionRequest,
      connectTimeoutMs: this.options.connectTimeoutMs,
      requestTimeoutMs: this.options.requestTimeoutMs,
      onEnvelope: this.options.onEnvelope,
      transport: this.options.transport,
      WebSocket: this.options.WebSocket,
      ...(this.options.attach !== undefined
        ? { attach: { connectionId: this.options.attach, protocolVersion: PROTOCOL_VERSION } }
        : {}),
    };
    const connection = await (this.bound ? this.bound.open(options) : openConnection(options));
    this.connection = connection;
    void connection.rpc.closed.then((reason) =>
      this.dropConnection(connection, reason.kind === "error" ? reason.error : undefined),
    );
  }

  private dropConnection(connection: OpenConnection, error?: Error): void {
    let reason: DisconnectedEvent["reason"] = error ? "error" : "disconnect";
    if (this.connection === connection) this.connection = undefined;
    else if (this.ending === connection) {
      this.ending = undefined;
      reason = "agentExited";
    } else return;
    this.configOptions.clear();
    this.hub.emit({ type: "disconnected", reason, ...(error ? { error } : {}) });
    // Iterators end with their connection, unless a new one is already open.
    if (!this.connection && !this.connecting) this.hub.endStreams();
  }

  /** A failed connect ends iterators too, so a loop waiting for this connection's events does not hang. */
  private connectFailed(error: unknown): void {
    this.lastConnectError = error;
    const cause = error instanceof Error ? error : new Error(String(error));
    this.hub.emit({ type: "disconnected", reason: "error", error: cause });
    this.hub.endStreams();
  }

  /**
   * The agent process is gone, so the connection is unusable at once. The server sends one `ended`
   * per session and then ends the stream; close after a short grace so the others still arrive.
   */
  private agentEnded(): void {
    const connection = this.connection;
    if (!connection) return;
    this.connection = undefined;
    this.ending = connection;
    const timer = setTimeout(() => void connection.rpc.close().catch(() => undefined), ENDED_GRACE_MS);
    // Node's timers can be unref'd (do not keep the process alive); browsers' are plain numbers.
    if (typeof timer === "object") timer.unref();
  }

  // ---- events ------------------------------------------------------------------------------

  /** Calls `listener` for every event of `type` (or `"*"` for all). Returns an unsubscribe function. */
  on<T extends SandboxAgentEventType>(
    type: T,
    listener: (event: EventOfType<T>) => void,
    filter?: Pick<EventFilter, "sessionId">,
  ): () => void;
  on(type: "*", listener: (event: SandboxAgentEvent) => void, filter?: EventFilter): () => void;
  on(type: string, listener: (event: never) => void, filter: EventFilter = {}): () => void {
    const types = type === "*" ? filter.types : [type as SandboxAgentEventType];
    return this.hub.subscribe(
      { ...filter, ...(types ? { types } : {}) },
      listener as (e: SandboxAgentEvent) => void,
    );
  }

  /**
   * Async iterator over events (buffered, nothing dropped). It ends on `disconnect()`, when the
   * connection closes, on `signal` abort, or when the loop breaks.
   */
  events(options: EventStreamOptions = {}): AsyncIterableIterator<SandboxAgentEvent> {
    return this.hub.stream(options);
  }

  // ---- sessions ----------------------------------------------------------------------------

  /** A new agent session; with a store, it becomes this client's recorded `agentSessionId`. */
  async newSession(options: NewSessionOptions): Promise<SessionState> {
    const result = await this.call("newSession", (rpc) =>
      rpc.newSession({
        cwd: options.cwd,
        mcpServers: options.mcpServers ?? [],
        ...(options.additionalDirectories ? { additionalDirectories: options.additionalDirectories } : {}),
        ...metaField(options.metadata),
      }),
    );
    return this.opened(sessionState(result.sessionId, result), options.cwd);
  }

  /** Re-opens a stored session; its history is replayed as `update` events before this resolves. */
  async loadSession(options: LoadSessionOptions): Promise<SessionState> {
    const result = await this.call("loadSession", (rpc) => rpc.loadSession(this.restoreParams(options)));
    return this.opened(sessionState(options.sessionId, result), options.cwd);
  }

  /** Re-opens a stored session without replaying its history. */
  async resumeSession(options: LoadSessionOptions): Promise<SessionState> {
    const result = await this.call("resumeSession", (rpc) => rpc.resumeSession(this.restoreParams(options)));
    return this.opened(sessionState(options.sessionId, result), options.cwd);
  }

  /** Copies a session (history included) into a new one. */
  async forkSession(options: ForkSessionOptions): Promise<SessionState> {
    const result = await this.call("forkSession", (rpc) => rpc.forkSession(this.restoreParams(options)));
    return this.opened(sessionState(result.sessionId, result), options.cwd);
  }

  /** Sends a prompt and resolves when the turn ends; `update` events stream meanwhile. */
  async prompt(options: PromptOptions): Promise<PromptResult> {
    const { sessionId, signal } = options;
    if (signal?.aborted) throw signal.reason;
    const onAbort = (): void => void this.cancel({ sessionId }).catch(() => undefined);
    signal?.addEventListener("abort", onAbort, { once: true });
    const prompt = promptBlocks(options.prompt);
    this.hub.emit({ type: "turnStarted", sessionId, prompt });
    try {
      const result = await this.call("prompt", (rpc) =>
        rpc.prompt({ sessionId, prompt, ...metaField(options.metadata) }),
      );
      this.hub.emit({ type: "turnEnded", sessionId, stopReason: result.stopReason });
      return { stopReason: result.stopReason, metadata: metadataOf(result) };
    } catch (error) {
      if (error instanceof AgentRequestError) {
        // The agent's own message, as followers of a mirrored session see it.
        const message = error.cause instanceof Error ? error.cause.message : error.message;
        this.hub.emit({ type: "turnFailed", sessionId, error: { code: error.code, message } });
      }
      throw error;
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /** Cancels the session's running turn; its pending permission requests are answered `cancelled`. */
  cancel(options: { sessionId: string }): Promise<void> {
    return this.call("cancel", (rpc) => rpc.cancel({ sessionId: options.sessionId }));
  }

  async setSessionMode(options: { sessionId: string; modeId: string }): Promise<void> {
    await this.call("setSessionMode", (rpc) => rpc.setSessionMode(options));
  }

  /** Sets one configuration option; resolves with every option's new value. */
  async setSessionConfigOption(options: {
    sessionId: string;
    configId: string;
    value: string | boolean;
  }): Promise<{ configOptions: SessionConfigOption[] }> {
    const { sessionId, configId, value } = options;
    const params: proto.SetSessionConfigOptionRequest =
      typeof value === "boolean"
        ? { sessionId, configId, type: "boolean", value }
        : { sessionId, configId, value };
    const result = await this.call("setSessionConfigOption", (rpc) => rpc.setSessionConfigOption(params));
    this.configOptions.set(sessionId, result.configOptions);
    return { configOptions: result.configOptions };
  }

  /**
   * Selects the session's model: the agent's model call when it has one, else its configuration
   * option of category `model`.
   */
  async setSessionModel(options: { sessionId: string; modelId: string }): Promise<void> {
    try {
      await this.call("setSessionModel", (rpc) => rpc.extMethod("session/set_model", options));
    } catch (error) {
      const option = this.configOptions.get(options.sessionId)?.find((o) => o.category === "model");
      if (!(error instanceof AgentRequestError) || error.code !== METHOD_NOT_FOUND || !option) throw error;
      await this.setSessionConfigOption({
        sessionId: options.sessionId,
        configId: option.id,
        value: options.modelId,
      });
    }
  }

  /** Lists sessions with their sandbox metadata (agent, timestamps, ended, custom keys…). */
  async listSessions(options: ListSessionsOptions = {}): Promise<SessionList> {
    return sessionList(await this.call("listSessions", (rpc) => rpc.listSessions(options)));
  }

  /** The models the session's agent offers. */
  async listModels(options: { sessionId: string }): Promise<ModelList> {
    return modelList(await this.call("listModels", (rpc) => rpc.extMethod(`${EXT}list_models`, options)));
  }

  /** Merges keys into the session's metadata (`title`, `model`, `mode` have effects; others are stored). */
  async setMetadata(options: { sessionId: string; metadata: SessionMetadata }): Promise<SessionMetadata> {
    const result = await this.call("setMetadata", (rpc) => rpc.extMethod(`${EXT}set_metadata`, options));
    return metadataResult(result);
  }

  /** Leaves the session running on the server but stops receiving its events on this connection. */
  async detachSession(options: { sessionId: string }): Promise<void> {
    await this.call("detachSession", (rpc) => rpc.extMethod(`${EXT}detach`, options));
  }

  /** Stops the session for good (its running turn is cancelled). */
  async terminateSession(options: { sessionId: string }): Promise<void> {
    await this.call("terminateSession", (rpc) => rpc.extMethod(`${EXT}terminate`, options));
    this.configOptions.delete(options.sessionId);
  }

  // ---- control plane -----------------------------------------------------------------------

  /** Server status; needs no agent connection. */
  health(): Promise<HealthStatus> {
    return this.control.health();
  }

  /** The agents this server can run. */
  listAgents(): Promise<AgentDescription[]> {
    return this.control.listAgents();
  }

  getAgent(agentId: string): Promise<AgentDescription> {
    return this.control.getAgent(agentId);
  }

  /** Installs the agent's packages on the server (no-op for agents that need none). */
  installAgent(agentId: string, options?: InstallAgentOptions): Promise<InstallResult> {
    return this.control.installAgent(agentId, options);
  }

  // ---- internals ---------------------------------------------------------------------------

  private async call<T>(operation: string, send: (rpc: AcpHttpClient) => Promise<T>): Promise<T> {
    await this.connecting?.catch(() => undefined);
    const connection = this.connection;
    if (!connection) throw this.notConnected(operation);
    try {
      return await send(connection.rpc);
    } catch (error) {
      throw convertError(operation, error, this.http.url("/v2/rpc"));
    }
  }

  private notConnected(operation: string): NotConnectedError {
    const cause = this.lastConnectError;
    const why = cause instanceof Error ? ` (connecting failed: ${cause.message})` : "";
    return new NotConnectedError(
      `${operation}: not connected${why}; call connect() first.`,
      cause ? { cause } : undefined,
    );
  }

  private restoreParams(options: LoadSessionOptions): proto.LoadSessionRequest {
    return {
      sessionId: options.sessionId,
      cwd: options.cwd,
      mcpServers: options.mcpServers ?? [],
      ...metaField(options.metadata),
    };
  }

  private async opened(state: SessionState, cwd: string): Promise<SessionState> {
    if (state.configOptions) this.configOptions.set(state.sessionId, state.configOptions);
    await this.bound?.recordAgentSession(state.sessionId, cwd);
    return state;
  }

  private trackConfig(event: SandboxAgentEvent): void {
    if (event.type === "update" && event.update.sessionUpdate === "config_option_update") {
      this.configOptions.set(event.sessionId, event.update.configOptions);
    }
  }
}
