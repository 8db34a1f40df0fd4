import { shortId, type Logger } from "../log.js";
import { AgentProcess, type AgentExit } from "./agent-process.js";
import {
  reattachMethodOf,
  type AgentLaunch,
  type ConnectionRecord,
  type ReattachMethod,
} from "./connection-record.js";
import { AnswerScanner } from "./agent-answer.js";
import { TextChunkScanner } from "./content-chunk.js";
import { snapshotOf, type ConnectionSnapshot } from "./connection-snapshot.js";
import {
  errorResponse,
  EXTENSION_PREFIX,
  idKey,
  isObject,
  kindOf,
  META_KEY,
  METHODS,
  sessionIdOf,
  withoutRequestEnv,
  type JsonRpcId,
  type JsonRpcMessage,
  type MessageKind,
} from "../protocol.js";
import type { ConnectionLog } from "../store/event-store.js";
import { EventLog } from "./event-log.js";
import type { ConnectionApi, ConnectionExtension } from "./extension.js";
import type { ConnectionObserver } from "./observer.js";
import type { RuntimeLimits } from "./options.js";
import type { OrphanGuard } from "./orphan-guard.js";
import { Outbound, type OutboundReader, type ReaderListener } from "./outbound.js";

export { batchLength, eventBytes, type EventBatch } from "./event-log.js";
export type { OutboundReader, ReaderListener } from "./outbound.js";

export type ConnectionState = "initializing" | "open" | "ended" | "closed";

/** Why initialize failed; the HTTP layer maps each kind to a status. */
export class InitializeError extends Error {
  constructor(
    readonly kind: "spawn" | "exited" | "timeout" | "rejected" | "aborted",
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/**
 * Why the server itself ends a connection, and what pending requests are told. The connection
 * then answers 410 with the reason, as after an agent exit.
 */
const SERVER_ENDS = {
  message_too_large:
    "The agent wrote a message over the server's maxMessageBytes; the server closed the connection.",
  output_stalled:
    "The client read none of the connection's output for stallMs; the server closed the connection.",
  idle: "The connection had no reader and no requests for idleMs; the server closed it.",
  agent_stdout_closed: "The agent closed its output without exiting; the server stopped it.",
  internal_error: "The server failed while handling this connection and closed it (see the server log).",
  shutdown: "The server is shutting down.",
  agent_restart_failed:
    "The server restarted and could not start the connection's agent again; start a new connection.",
} as const;

/** What a request in flight when the server stopped (crash or restart) is answered with. */
const RESTARTED =
  "The server restarted while this request was in flight; its answer is lost. Send it again if it is safe to repeat.";

/** What an agent request the client had not answered when the server stopped is withdrawn with. */
const WITHDRAWN =
  "The server restarted and the agent that sent this request is gone: it is withdrawn, and an answer to it is ignored.";

/**
 * A request the server could not record in flight (its data directory is full or failing), so it
 * was refused before anything acted on it: run unrecorded, a restart would leave it unanswered.
 */
export class NotRecordedError extends Error {
  constructor(override readonly cause: Error) {
    super(
      `The server could not record this request (${cause.message}), so it did not run it: a restart would have left it unanswered. ` +
        "Nothing was done: send it again once the server's data directory has room again (the server retries writing it every second; its log says why it failed).",
    );
  }
}

/** The agent could not be started again after a restart: the connection ended (see `ending`). */
export class AgentUnavailableError extends Error {}

/** What `agentGone` resolves with for a connection whose agent was never started (recovered, unused). */
const NO_AGENT: Promise<AgentExit> = Promise.resolve({ code: null, signal: null, stderrTail: "" });

export type ServerEndReason = keyof typeof SERVER_ENDS;

/** How a connection ended (agent exit or a server decision), as told to the client. */
export interface ConnectionEnd {
  /** `agent_exited` or a `ServerEndReason`. */
  reason: string;
  /** The error message of every request that was pending. */
  message: string;
  /** The error's `data` and the fields of `_sandboxagent/session/ended` (with `reason`). */
  data: Record<string, unknown>;
}

const SESSION_RESULT_METHODS = new Set(["session/new", "session/fork"]);
const SESSION_PARAM_METHODS = new Set(["session/load", "session/resume"]);

/** Whether the connection tracks sessions from requests with `method` (`trackSession`): it reads their params and results. */
function tracksSessions(method: string): boolean {
  return SESSION_RESULT_METHODS.has(method) || SESSION_PARAM_METHODS.has(method);
}

export interface ConnectionOptions {
  /** The connection's id, and the prefix of its event ids (so a cursor from another connection is recognised). */
  id: string;
  epoch: string;
  /** Where its events go (memory or disk). */
  log: ConnectionLog;
  /** The agent of a new connection, started at once… */
  launch?: AgentLaunch;
  /** …or the connection as an earlier run of the server left it: its agent starts on first use. */
  recovered?: { record: ConnectionRecord; relaunch: () => Promise<AgentLaunch> };
  limits: RuntimeLimits;
  logger: Logger;
  extensions: ConnectionExtension[];
  /** Kills the agent's process group if the server dies without stopping it. */
  guard?: OrphanGuard;
  observer?: ConnectionObserver;
  /** Called once the connection is closed for good, so the registry can forget it. */
  onClosed: (conn: Connection) => void;
  /**
   * Called when what `record()` returns changed (sessions, requests in flight, the ending);
   * returns why it could not be written (ENOSPC…: it is kept in memory and written later), if so.
   * Undefined when nothing survives a restart (no record is kept).
   */
  persist?: (conn: Connection) => Error | undefined;
  /** Called when a recovered connection started its agent again. */
  agentStarted?: (conn: Connection) => void;
}

/**
 * One ACP connection: one agent process, one ordered outbound event log with replay, and at most
 * one reader of it (`openReader`; the transport turns it into a stream). Messages are forwarded
 * verbatim in both directions; the server only reads the envelope (`id`, `method`) to track
 * pending requests. Nothing here knows HTTP.
 */
export class Connection implements ConnectionApi {
  readonly id: string;
  readonly epoch: string;
  readonly agentId: string;
  readonly sessionIds = new Set<string>();
  state: ConnectionState = "initializing";
  lastActivity = Date.now();
  exit: AgentExit | undefined;
  /** Set once the connection ended: the agent exited, or the server ended it. */
  ending: ConnectionEnd | undefined;
  /** The `protocolVersion` the agent answered to initialize. */
  protocolVersion: number | undefined;
  readonly createdAt: string;

  private readonly outbound: Outbound;
  /** Undefined for a recovered connection until its first use starts the agent again (`running`). */
  private agent: AgentProcess | undefined;
  private reviving: Promise<AgentProcess> | undefined;
  /** The client's initialize request, without secrets: what a restarted agent is sent. */
  private initializeRequest: JsonRpcMessage | undefined;
  private reattach: ReattachMethod | undefined;
  private readonly sessionCwds = new Map<string, string | undefined>();
  /** Sessions being re-attached after a restart: the history the agent replays is not delivered again. */
  private readonly reattaching = new Set<string>();
  private readonly pendingClient = new Map<string, JsonRpcMessage>();
  /**
   * The keys of the client requests an extension answers (the server's own methods) and whose
   * handler has not answered yet. The connection's end answers them as it does every request in
   * flight, so the handler's answer, which comes later (its requests to the agent fail then), is
   * dropped rather than sent twice.
   */
  private readonly selfAnswered = new Set<string>();
  /** Client requests whose answer an extension holds back (`agentResponse` → "held"): settled when it is emitted. */
  private readonly heldAnswers = new Set<string>();
  /** Agent requests sent to the client and not answered yet, by id key. */
  private readonly pendingAgent = new Map<
    string,
    { id: JsonRpcId; method: string; sessionId: string | undefined }
  >();
  /** Requests extensions sent to the agent (`request()`); their responses never reach the client. */
  private readonly pendingServer = new Map<string, (response: JsonRpcMessage) => void>();
  private serverRequestSeq = 0;
  private initWaiter: { key: string; resolve: (m: JsonRpcMessage) => void } | undefined;
  private endedTimer: NodeJS.Timeout | undefined;
  private closing: Promise<void> | undefined;
  private markClosed!: () => void;
  /** Resolves once the connection is closed for good (streams bound to it end then). */
  readonly whenClosed = new Promise<void>((resolve) => (this.markClosed = resolve));
  /** Recognises text chunks, which skip JSON.parse; undefined when an extension needs them parsed. */
  private readonly textChunks: TextChunkScanner | undefined;
  /**
   * The extensions that see text chunks, found once: looking `agentTextChunk` up on every
   * extension for every chunk was a property load on objects of as many shapes.
   */
  private readonly textChunkHooks: Array<Required<Pick<ConnectionExtension, "agentTextChunk">>>;
  /** Recognises answers to requests in flight, which skip JSON.parse; undefined when an extension reads every answer. */
  private readonly answers: AnswerScanner | undefined;
  /** The extensions that see answers (`agentResponse`), each saying which results it reads. */
  private readonly resultReaders: Array<Required<Pick<ConnectionExtension, "readsAgentResult">>>;
  /** The extensions that see client requests or their answers (`readsParams` asks them). */
  private readonly paramReaders: ConnectionExtension[];
  /** The last method `readsParams` said no to ("": none yet). */
  private paramlessMethod = "";
  /** The extensions with `clientMessage`, found once: a request is offered to these only. */
  private readonly clientHooks: Array<Required<Pick<ConnectionExtension, "clientMessage">>>;

  constructor(private readonly options: ConnectionOptions) {
    this.id = options.id;
    this.epoch = options.epoch;
    this.agentId = options.launch?.agent.id ?? options.recovered!.record.agentId;
    this.createdAt = options.recovered?.record.createdAt ?? new Date().toISOString();
    if (options.extensions.every((e) => !e.agentMessage || e.agentTextChunk))
      this.textChunks = new TextChunkScanner();
    this.textChunkHooks = options.extensions.filter(
      (e): e is ConnectionExtension & Required<Pick<ConnectionExtension, "agentTextChunk">> =>
        e.agentTextChunk !== undefined,
    );
    const responseHooks = options.extensions.filter((e) => e.agentResponse !== undefined);
    if (responseHooks.every((e) => e.readsAgentResult)) this.answers = new AnswerScanner();
    this.resultReaders = responseHooks as typeof this.resultReaders;
    this.paramReaders = options.extensions.filter(
      (e) => e.clientMessage !== undefined || e.agentResponse !== undefined,
    );
    this.clientHooks = options.extensions.filter(
      (e): e is ConnectionExtension & Required<Pick<ConnectionExtension, "clientMessage">> =>
        e.clientMessage !== undefined,
    );
    const { limits } = options;
    this.outbound = new Outbound(new EventLog(options.log), {
      maxBufferedBytes: limits.maxBufferedBytes,
      stallMs: limits.stallMs,
      pause: () => this.agent?.pauseOutput(),
      resume: () => this.agent?.resumeOutput(),
      stalled: (pending) => {
        this.logger.warn("output stalled; closing connection", { connection: shortId(this.id), pending });
        this.safely("stall", () => this.abandon("output_stalled", { stallMs: limits.stallMs }));
      },
      readerChanged: () => (this.lastActivity = Date.now()),
      corrupt: (error) =>
        this.logger.error("event log segment is corrupt; its events are dropped", {
          connection: shortId(this.id),
          file: error.file,
          offset: error.offset,
          throughSeq: error.throughSeq,
        }),
    });
    if (options.launch) this.agent = this.spawn(options.launch);
    else this.restore(options.recovered!.record);
  }

  /** Starts the agent process. */
  private spawn(launch: AgentLaunch): AgentProcess {
    const { options } = this;
    const agent = new AgentProcess(launch.agent.spec, {
      env: launch.env,
      cwd: launch.cwd,
      maxLineBytes: options.limits.maxMessageBytes,
      guard: options.guard,
      onLine: (chunk, start, end) => {
        // A callback of the agent's stdout: an exception must fail this connection, not the server.
        try {
          this.onAgentLine(chunk.toString("utf8", start, end));
        } catch (error) {
          this.failed("agent output", error);
        }
      },
      scanLines:
        (this.textChunks ?? this.answers) && ((text, bytes, from) => this.scanAgentText(text, bytes, from)),
      onOversizeLine: (bytes) => {
        this.logger.error("agent wrote a line over the message limit; closing", {
          connection: shortId(this.id),
          bytes,
        });
        this.safely("oversize line", () =>
          this.abandon("message_too_large", { maxMessageBytes: options.limits.maxMessageBytes }),
        );
      },
      onOutputClosed: () => {
        this.logger.warn("agent closed stdout but did not exit; stopping it", {
          connection: shortId(this.id),
        });
        this.safely("stdout closed", () =>
          this.abandon("agent_stdout_closed", { stderrTail: agent.stderrTail(4096) }),
        );
      },
      onStderr: (text) =>
        this.logger.debug("agent stderr", { connection: shortId(this.id), text: text.slice(0, 500) }),
    });
    void agent.exited
      .then((exit) => this.onAgentExit(exit))
      .catch((error: unknown) => this.failed("agent exit", error));
    return agent;
  }

  /**
   * A connection an earlier run of the server left (stopped or killed): same id, same event log.
   * Its agent is gone, so requests that were in flight get an error now, and sessions that cannot
   * be re-attached end now, both in the log where every client finds them; the agent is started
   * again on first use (`running`).
   */
  private restore(record: ConnectionRecord): void {
    this.initializeRequest = record.initialize;
    this.protocolVersion = record.protocolVersion;
    this.reattach = record.reattach;
    for (const [sessionId, { cwd }] of Object.entries(record.sessions)) {
      this.sessionIds.add(sessionId);
      this.sessionCwds.set(sessionId, cwd);
    }
    if (record.ending !== undefined) {
      // It had ended: it stays readable until `endedRetentionMs`, as it would have.
      this.state = "ended";
      this.ending = record.ending;
      this.outbound.end();
      this.scheduleClose();
      return;
    }
    this.state = "open";
    const data = { reason: "server_restarted" };
    // The requests in flight: those of the connection's request journal, and those an older
    // server kept in the record instead. Each leaves the journal once its error is written.
    const pending = new Map<string, JsonRpcId>();
    for (const id of [...(record.pending ?? []), ...this.options.log.unansweredRequests()])
      pending.set(idKey(id), id);
    for (const id of pending.values()) {
      this.settle(id);
      this.emit(errorResponse(id, -32603, RESTARTED, data));
    }
    // The agent that asked is gone: its requests are withdrawn, as an ACP sender cancels a request.
    for (const { id, method, sessionId } of record.agentPending ?? [])
      this.emit({
        jsonrpc: "2.0",
        method: "$/cancel_request",
        params: {
          requestId: id,
          _meta: { [META_KEY]: { ...data, method, sessionId, message: WITHDRAWN } },
        },
      });
    if (this.reattach === undefined)
      for (const sessionId of Object.keys(record.sessions))
        this.sessionLost(sessionId, "The server restarted and the agent cannot load sessions again.");
    this.persist();
  }

  /** The agent process, started again first for a recovered connection. */
  private running(): Promise<AgentProcess> {
    if (this.agent) return Promise.resolve(this.agent);
    this.reviving ??= this.revive();
    return this.reviving;
  }

  /**
   * Starts the agent of a recovered connection: the client's initialize again, then each session
   * re-attached (`session/load`, else `session/resume`) with what the agent replays dropped; a
   * session that cannot be re-attached ends. If the agent cannot start, the connection ends.
   */
  private async revive(): Promise<AgentProcess> {
    const { relaunch } = this.options.recovered!;
    let agent: AgentProcess | undefined;
    try {
      const launch = await relaunch();
      if (this.state !== "open") throw new Error("the connection was closed");
      agent = this.agent = this.spawn(launch);
      this.options.agentStarted?.(this);
      this.logger.info("agent started again for a recovered connection", { connection: shortId(this.id) });
      const request = { ...this.initializeRequest!, id: "_sandboxagent:initialize" };
      await this.handshake(agent, request, JSON.stringify(request), new AbortController().signal);
      for (const sessionId of [...this.sessionIds])
        await this.reattachSession(agent, sessionId, this.sessionCwds.get(sessionId) ?? launch.cwd);
      return agent;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.logger.warn("could not start the agent of a recovered connection", {
        connection: shortId(this.id),
        error: message,
      });
      this.end({
        reason: "agent_restart_failed",
        message: SERVER_ENDS.agent_restart_failed,
        data: { error: message },
      });
      if (agent) void agent.terminate(this.options.limits.killGraceMs);
      throw new AgentUnavailableError(SERVER_ENDS.agent_restart_failed);
    }
  }

  private async reattachSession(
    agent: AgentProcess,
    sessionId: string,
    cwd: string | undefined,
  ): Promise<void> {
    const method = this.reattach!;
    this.reattaching.add(sessionId);
    let response: JsonRpcMessage;
    try {
      response = await this.sendRequest(agent, method, { sessionId, cwd, mcpServers: [] });
    } finally {
      this.reattaching.delete(sessionId);
    }
    if (response.error !== undefined) {
      this.sessionLost(
        sessionId,
        `The server restarted and the agent could not ${method === "session/load" ? "load" : "resume"} the session: ${response.error.message}`,
      );
      return;
    }
    for (const ext of this.options.extensions)
      await ext.sessionReattached?.(sessionId, response.result, this);
  }

  /** A session that did not survive a restart: the client is told, and it is forgotten. */
  private sessionLost(sessionId: string, message: string): void {
    this.emit({
      jsonrpc: "2.0",
      method: METHODS.ended,
      params: { sessionId, reason: "server_restarted", message },
    });
    this.forgetSession(sessionId);
  }

  /** Runs a rare callback (a timer, an agent stream event) so that an exception fails only this connection. */
  private safely(during: string, run: () => void): void {
    try {
      run();
    } catch (error) {
      this.failed(during, error);
    }
  }

  /**
   * An unexpected exception in a callback of the agent's streams or of a timer, which would
   * otherwise leave the event loop and end the server: it is logged, and fails this connection
   * only (pending requests get an `internal_error`).
   */
  private failed(during: string, error: unknown): void {
    this.logger.error("unexpected error; closing the connection", {
      connection: shortId(this.id),
      during,
      error: error instanceof Error ? (error.stack ?? error.message) : String(error),
    });
    try {
      this.abandon("internal_error");
    } catch (again) {
      this.logger.error("could not end the connection cleanly", { error: String(again) });
      void this.close("internal_error");
    }
  }

  private get logger(): Logger {
    return this.options.logger;
  }

  get pid(): number | undefined {
    return this.agent?.pid;
  }

  get hasReader(): boolean {
    return this.outbound.hasReader;
  }

  /** A read-only copy of what the connection list shows (see `connection-snapshot.ts`). */
  snapshot(): ConnectionSnapshot {
    return snapshotOf(this, this.outbound.log.lastSeq, this.options.extensions);
  }

  /** Sends `initialize` and resolves with the agent's response (extensions applied). */
  async initialize(request: JsonRpcMessage, raw: string, signal: AbortSignal): Promise<JsonRpcMessage> {
    try {
      const message = await this.handshake(this.agent!, request, raw, signal);
      this.initializeRequest = { ...request, params: withoutRequestEnv(request.params) };
      this.state = "open";
      this.lastActivity = Date.now(); // idle time counts from here, not from the spawn
      return message;
    } catch (error) {
      void this.close("initialize_failed");
      throw error;
    }
  }

  /** Sends `initialize` to `agent`; resolves with its answer, extensions applied. */
  private async handshake(
    agent: AgentProcess,
    request: JsonRpcMessage,
    raw: string,
    signal: AbortSignal,
  ): Promise<JsonRpcMessage> {
    const key = idKey(request.id as JsonRpcId);
    const response = new Promise<JsonRpcMessage>((resolve) => (this.initWaiter = { key, resolve }));
    const exited = agent.exited.then((exit) => {
      throw exit.spawnError
        ? new InitializeError("spawn", `Could not start agent: ${exit.spawnError}`, { ...exit })
        : new InitializeError("exited", "The agent exited before answering initialize.", { ...exit });
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new InitializeError(
              "timeout",
              `The agent did not answer initialize within ${this.options.limits.initializeTimeoutMs} ms.`,
            ),
          ),
        this.options.limits.initializeTimeoutMs,
      );
    });
    const aborted = new Promise<never>((_, reject) => {
      const fail = () => reject(new InitializeError("aborted", "The client went away during initialize."));
      if (signal.aborted) fail();
      signal.addEventListener("abort", fail, { once: true });
    });
    const failure = Promise.race([exited, timeout, aborted]);
    failure.catch(() => {}); // observed below; must not count as unhandled while the write is pending
    let changed = false;
    for (const ext of this.options.extensions)
      changed = ext.initializeRequest?.(request, this) === true || changed;
    const line = changed ? JSON.stringify(request) : raw;
    try {
      const written = agent.write(line);
      const message = await Promise.race([written ? written.then(() => response) : response, failure]);
      if (message.error)
        throw new InitializeError("rejected", "The agent rejected initialize.", { response: message });
      // Read before extensions adjust the result: what the agent itself can do.
      this.reattach = reattachMethodOf(message.result);
      if (isObject(message.result)) {
        if (typeof message.result.protocolVersion === "number")
          this.protocolVersion = message.result.protocolVersion;
        for (const ext of this.options.extensions) ext.initializeResult?.(message.result, this);
      }
      return message;
    } finally {
      clearTimeout(timer);
      this.initWaiter = undefined;
    }
  }

  /**
   * Accepts one client message; done once it is queued to the agent in acceptance order. A request
   * is recorded in flight before anything acts on it (`inFlight`), so the transport may tell the
   * client it was accepted (HTTP: the 202) as soon as this is done. Throws (or rejects with)
   * `NotRecordedError` when the record cannot be written: nothing acted on the request then.
   *
   * Returns a promise only when there is something to wait for (an extension that answers later, a
   * recovered connection's agent starting again, a full stdin pipe); the common case, a message for
   * a running agent with room in its pipe, is done on return. An `async` function here cost every
   * request a promise, two microtask hops and TurboFan's largest compilation of a connection's
   * first requests (bench/README.md, Cold window).
   */
  receive(message: JsonRpcMessage, raw: string): Promise<void> | undefined {
    this.lastActivity = Date.now();
    const kind = kindOf(message);
    // A method the server answers itself acts (writes metadata, ends a session) before its answer
    // is logged: it is recorded in flight first, as a request for the agent is, so that a restart
    // answers it rather than leave its fate unknown. Its answer (`emit`) takes it out again.
    const serverMethod = kind === "request" && message.method!.startsWith(EXTENSION_PREFIX);
    if (serverMethod) {
      this.inFlight(message);
      this.selfAnswered.add(idKey(message.id as JsonRpcId));
    }
    return this.offerToExtensions(message, raw, kind, serverMethod, 0);
  }

  /**
   * Whether anything here reads more of a client request with this method than its id and
   * method: the server's own methods, those that start or attach sessions (`trackSession`), and
   * what an extension says (`ConnectionExtension.readsParams`). The transport parses only these
   * (transport/envelope.ts); `receive` gets the others as `{ jsonrpc, id, method }`.
   */
  readsParams(method: string): boolean {
    // A connection's requests are mostly of one method (a turn's `session/prompt`): the answer for
    // it is found once per connection, not at every request (it depends on the method alone).
    if (method === this.paramlessMethod) return false;
    if (method.startsWith(EXTENSION_PREFIX) || tracksSessions(method)) return true;
    // An extension without `readsParams` reads every message.
    for (const ext of this.paramReaders) if (ext.readsParams?.(method) !== false) return true;
    this.paramlessMethod = method;
    return false;
  }

  /** The extensions from the `from`th on see the message; the first that handles it ends its way. */
  private offerToExtensions(
    message: JsonRpcMessage,
    raw: string,
    kind: MessageKind,
    serverMethod: boolean,
    from: number,
  ): Promise<void> | undefined {
    const extensions = this.clientHooks;
    for (let i = from; i < extensions.length; i++) {
      const handled = extensions[i]!.clientMessage(message, this);
      if (handled === true) return undefined;
      // Awaited only when it is a promise: an `await` per extension was a microtask hop each on every request.
      if (handled instanceof Promise)
        return handled.then((yes) =>
          yes ? undefined : this.offerToExtensions(message, raw, kind, serverMethod, i + 1),
        );
    }
    return this.toAgent(message, raw, kind, serverMethod);
  }

  /** A message no extension handled: it goes to the agent (started again first if it was recovered). */
  private toAgent(
    message: JsonRpcMessage,
    raw: string,
    kind: MessageKind,
    serverMethod: boolean,
  ): Promise<void> | undefined {
    // No extension answers it (none is loaded): it goes to the agent.
    if (serverMethod) this.selfAnswered.delete(idKey(message.id as JsonRpcId));
    if (kind === "response" && !this.answeredAgent(message)) return undefined;
    const agent = this.agent;
    if (agent === undefined) return this.toRecoveredAgent(message, raw, kind, serverMethod);
    return this.deliver(agent, message, raw, kind, serverMethod);
  }

  /** Writes the message to `agent`, a client request recorded in flight first (`inFlight`). */
  private deliver(
    agent: AgentProcess,
    message: JsonRpcMessage,
    raw: string,
    kind: MessageKind,
    serverMethod: boolean,
  ): Promise<void> | undefined {
    if (kind === "request" && !serverMethod) this.inFlight(message);
    return agent.write(raw);
  }

  /**
   * A client's answer to an agent request: whether it goes to the agent. A second answer (a client
   * retry) or an answer to an unknown id is dropped, not forwarded twice.
   */
  private answeredAgent(message: JsonRpcMessage): boolean {
    if (this.pendingAgent.delete(idKey(message.id as JsonRpcId))) {
      this.persist();
      return true;
    }
    this.logger.info("dropped response to unknown agent request", {
      connection: shortId(this.id),
      id: message.id,
    });
    return false;
  }

  /** `toAgent` for a recovered connection whose agent is not running yet: started first. */
  private toRecoveredAgent(
    message: JsonRpcMessage,
    raw: string,
    kind: MessageKind,
    serverMethod: boolean,
  ): Promise<void> {
    return this.running().then((agent) => this.deliver(agent, message, raw, kind, serverMethod));
  }

  /**
   * Request `message` is in flight: recorded before it runs and before the client is told it was
   * accepted, so that a restart answers it (`server_restarted`) however soon after the
   * acknowledgement it comes. With a durable store that is one line appended to the connection's
   * request journal (`ConnectionLog.recordRequest`: a `write` of a few bytes to the page cache),
   * and its answer takes it out once the answer is written (`settle`). This replaced writing the
   * index's connection record, which cost too much per request to do before every 202, so the
   * 202 used to wait for the answer instead (up to a grace of 5 ms) and followed it on the critical
   * path. A record that cannot be written refuses the request (`NotRecordedError`) rather than run
   * it unrecorded.
   */
  private inFlight(message: JsonRpcMessage): void {
    const id = message.id as JsonRpcId;
    const failure = this.options.log.recordRequest(id);
    if (failure !== undefined) throw new NotRecordedError(failure);
    this.pendingClient.set(idKey(id), message);
  }

  /**
   * Request `id` is answered by the next event appended: it leaves the record once that event is
   * written (synced, with `fsync`), so a crash in between still answers it.
   */
  private settle(id: JsonRpcId): void {
    this.options.log.settleRequest(id, this.outbound.log.lastSeq + 1);
  }

  /** Whether a client request with this id is still waiting for the agent. */
  isPending(id: JsonRpcId): boolean {
    return this.pendingClient.has(idKey(id));
  }

  emit(message: JsonRpcMessage): void {
    // The server's own answer to a client request in flight (an extension method): no longer in flight.
    if (message.method === undefined && (typeof message.id === "string" || typeof message.id === "number")) {
      const key = idKey(message.id);
      if (this.pendingClient.delete(key)) {
        // Kept at the end (`end` answers): the handler's answer then comes second.
        if (this.state === "open") this.selfAnswered.delete(key);
        this.settle(message.id);
      } else if (this.heldAnswers.delete(key)) this.settle(message.id);
      else if (this.selfAnswered.delete(key)) return;
    }
    let line: string;
    try {
      line = JSON.stringify(message);
    } catch (error) {
      // E.g. an agent's error nested too deep to copy into an answer: the request fails, it does not hang.
      this.logger.error("could not serialize a message for the client", {
        connection: shortId(this.id),
        error: String(error),
      });
      const id = message.id;
      if (typeof id !== "string" && typeof id !== "number") return;
      line = JSON.stringify(
        errorResponse(id, -32603, "Internal error: the answer could not be serialized.", {
          reason: "unserializable",
        }),
      );
    }
    this.append(line);
  }

  async forward(message: JsonRpcMessage): Promise<void> {
    const agent = await this.running();
    await agent.write(JSON.stringify(message));
  }

  async request(method: string, params: unknown): Promise<JsonRpcMessage> {
    let agent: AgentProcess;
    try {
      agent = await this.running();
    } catch (error) {
      return errorResponse(`_sandboxagent:${++this.serverRequestSeq}`, -32603, (error as Error).message);
    }
    return this.sendRequest(agent, method, params);
  }

  private sendRequest(agent: AgentProcess, method: string, params: unknown): Promise<JsonRpcMessage> {
    const id = `_sandboxagent:${++this.serverRequestSeq}`;
    if (this.exit) return Promise.resolve(errorResponse(id, -32603, "The agent process has exited."));
    const response = new Promise<JsonRpcMessage>((resolve) => this.pendingServer.set(idKey(id), resolve));
    void agent.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    return response;
  }

  forgetSession(sessionId: string): void {
    this.sessionIds.delete(sessionId);
    this.sessionCwds.delete(sessionId);
    this.persistAfterCommit();
  }

  /** What a durable store keeps of the connection (`connection-record.ts`). */
  record(): ConnectionRecord {
    const sessions: ConnectionRecord["sessions"] = {};
    for (const id of this.sessionIds) sessions[id] = { cwd: this.sessionCwds.get(id) };
    return {
      agentId: this.agentId,
      epoch: this.epoch,
      createdAt: this.createdAt,
      initialize: this.initializeRequest!,
      protocolVersion: this.protocolVersion,
      reattach: this.reattach,
      sessions,
      agentPending: [...this.pendingAgent.values()],
      ending: this.ending,
    };
  }

  /** Writes the record now; returns why it could not be written, if so. */
  private persist(): Error | undefined {
    const { persist } = this.options;
    if (
      persist === undefined ||
      this.initializeRequest === undefined ||
      this.state === "closed" ||
      this.state === "initializing"
    )
      return undefined;
    return persist(this);
  }

  /** Writes the record once the events appended in this turn are: an answer recorded is an answer logged. */
  private persistAfterCommit(): void {
    this.outbound.afterCommit(() => this.persist());
  }

  /** The sequence number of the newest event (the log's head). */
  get lastSeq(): number {
    return this.outbound.log.lastSeq;
  }

  /** The oldest cursor a reader may still resume from. */
  get oldestCursor(): number {
    return this.outbound.log.oldestCursor;
  }

  /** Whether a reader may resume after event `seq` (it was sent, and is still kept for replay). */
  canReplayFrom(seq: number): boolean {
    return this.outbound.canReplayFrom(seq);
  }

  /** Whether the connection ended and a reader at `cursor` (default: never-read events) has nothing left to get. */
  drained(cursor: number | undefined): boolean {
    return this.state === "ended" && this.outbound.drained(cursor);
  }

  /**
   * Opens the connection's reader at `cursor` (default: the events no reader received yet); a
   * reader that is already open ends (a reconnect with a cursor takes over).
   */
  openReader(cursor: number | undefined, listener: ReaderListener): OutboundReader {
    return this.outbound.openReader(cursor, listener);
  }

  /** Closes the connection and stops its agent; later calls wait for the same stop. */
  close(reason: string): Promise<void> {
    this.closing ??= this.closeOnce(reason);
    return this.closing;
  }

  /**
   * The server gives up on the connection: pending requests fail with the reason (delivered
   * before the stream ends), the id answers 410 with it for `endedRetentionMs`, and the agent is
   * stopped gently with its output discarded.
   */
  abandon(reason: ServerEndReason, data: Record<string, unknown> = {}): void {
    if (this.state === "initializing") {
      void this.close(reason); // the initialize fails: the agent is stopped
      return;
    }
    this.end({ reason, message: SERVER_ENDS[reason], data });
    this.agent?.discardOutput();
    void this.agent?.terminate(this.options.limits.killGraceMs);
  }

  /** Server shutdown: pending requests fail, the connection closes, and the agent is stopped now rather than gently. */
  async shutdown(): Promise<void> {
    try {
      this.end({ reason: "shutdown", message: SERVER_ENDS.shutdown, data: {} });
    } finally {
      void this.close("shutdown");
    }
    await this.agent?.kill(this.options.limits.killGraceMs);
  }

  /**
   * Server shutdown with a durable event log: the connection is kept for the next run (its log
   * and record stay as they are; requests in flight are answered by the next run), readers end,
   * and the agent is stopped now. Nothing more is logged: the agent's exit is no connection end.
   */
  async suspend(): Promise<void> {
    if (this.state === "closed") return;
    this.state = "closed";
    clearTimeout(this.endedTimer);
    this.agent?.discardOutput();
    this.outbound.close();
    this.options.log.commit();
    this.options.log.close();
    this.markClosed();
    await this.agent?.kill(this.options.limits.killGraceMs);
  }

  /** A hurried shutdown: SIGKILL to the agent's group now. */
  hurry(): void {
    this.agent?.hurry();
  }

  /** Resolves when the agent process is gone, whether it exited or was stopped. */
  get agentGone(): Promise<AgentExit> {
    return this.agent?.exited ?? NO_AGENT;
  }

  private async closeOnce(reason: string): Promise<void> {
    const previous = this.state;
    this.state = "closed";
    try {
      this.options.observer?.closed(this, reason);
      clearTimeout(this.endedTimer);
      // Before the record goes: a crash in between leaves the record, never the extensions' state alone.
      for (const ext of this.options.extensions) ext.connectionClosed?.(this.id);
      this.options.onClosed(this);
      this.outbound.close();
      this.options.log.remove();
      this.markClosed();
      if (previous === "open")
        for (const ext of this.options.extensions) ext.sessionsEnded?.(this, undefined);
    } catch (error) {
      // Nothing awaits a close: a failure here must neither escape as an unhandled rejection nor keep the agent running.
      this.logger.error("error while closing a connection", {
        connection: shortId(this.id),
        error: String(error),
      });
    }
    await this.agent?.terminate(this.options.limits.killGraceMs);
  }

  /**
   * The line at `from` of the agent's stdout (`text`: whole lines as a byte string, one character
   * per byte, and `bytes` the same bytes) if it is a text chunk (`content-chunk.ts`) or an answer
   * (`scanAnswer`); returns where the next line starts, or -1 for any other line (it goes to
   * `onAgentLine`).
   */
  private scanAgentText(text: string, bytes: Uint8Array, from: number): number {
    const scanner = this.textChunks;
    const session = scanner?.match(text, from);
    if (session === undefined) return this.scanAnswer(text, bytes, from);
    const { lineEnd, next } = scanner!;
    try {
      if (this.reattaching.size > 0 && this.reattaching.has(session)) return next;
      let dropped = false;
      for (const ext of this.textChunkHooks) dropped = ext.agentTextChunk(session, this) === true || dropped;
      // Valid UTF-8 on one line, as re-encoding the message would give it: the agent's bytes go in.
      if (!dropped) this.appendBytes(bytes, from, lineEnd);
    } catch (error) {
      // A callback of the agent's stdout: an exception must fail this connection, not the server.
      this.failed("agent output", error);
    }
    return next;
  }

  /**
   * The line at `from` if it answers a client request in flight, in the canonical form of
   * `agent-answer.ts`, and nothing reads its result: what `routeAgentMessage` does for an answer
   * (the request leaves the in-flight map and is settled by the event appended next) and the
   * agent's bytes appended, with no parse. Returns where the next line starts, or -1 to leave the
   * line to `onAgentLine` (any other line, an id not in flight, `initialize`'s answer, a server
   * request's, one whose result is read).
   */
  private scanAnswer(text: string, bytes: Uint8Array, from: number): number {
    const scanner = this.answers;
    if (scanner === undefined || this.initWaiter !== undefined) return -1;
    const key = scanner.match(text, from, bytes);
    if (key === undefined || this.pendingServer.has(key)) return -1;
    const request = this.pendingClient.get(key);
    if (request === undefined || this.readsResult(request)) return -1;
    try {
      this.pendingClient.delete(key);
      // `settle`, written out: called from here, it was a TurboFan job of its own in every run.
      this.options.log.settleRequest(request.id as JsonRpcId, this.outbound.log.lastSeq + 1);
      // Valid JSON in UTF-8 with no CR: the bytes `onAgentLine` would append.
      this.appendBytes(bytes, from, scanner.lineEnd);
    } catch (error) {
      // A callback of the agent's stdout: an exception must fail this connection, not the server.
      this.failed("agent output", error);
    }
    return scanner.next;
  }

  /** Whether the answer to client `request` is read: sessions it creates or attaches, an extension's methods. */
  private readsResult(request: JsonRpcMessage): boolean {
    const method = request.method!;
    if (tracksSessions(method)) return true;
    for (const ext of this.resultReaders) if (ext.readsAgentResult(request)) return true;
    return false;
  }

  /** One line of the agent's stdout that neither scan took (no text chunk, no answer `scanAnswer` takes). */
  private onAgentLine(line: string): void {
    let message: JsonRpcMessage;
    try {
      const parsed: unknown = JSON.parse(line);
      if (!isObject(parsed)) throw new Error("not a JSON object");
      message = parsed as JsonRpcMessage;
    } catch (error) {
      return this.dropUnparsed(line, error);
    }
    if (this.initWaiter && this.answersInitialize(message)) return this.initWaiter.resolve(message);
    const routed = this.routeAgentMessage(message);
    if (routed !== null) this.append(routed ?? withoutRawCarriageReturns(line));
  }

  // The rare branches of `onAgentLine`, in functions of their own: TurboFan inlines what a hot
  // function calls, and compiling the request path is most of a connection's first requests' CPU
  // (bench/README.md, Cold window); a call that never ran is not inlined.

  /** Whether agent `message` is the answer to the `initialize` being sent (`handshake`). */
  private answersInitialize(message: JsonRpcMessage): boolean {
    if (message.id === undefined || message.id === null || message.method !== undefined) return false;
    return idKey(message.id) === this.initWaiter!.key;
  }

  /** An agent line that is no JSON object: logged, and given to the client as `METHODS.unparsed`. */
  private dropUnparsed(line: string, error: unknown): void {
    this.logger.warn("dropped non-JSON agent output", {
      connection: shortId(this.id),
      line: line.slice(0, 200),
    });
    this.emit({
      jsonrpc: "2.0",
      method: METHODS.unparsed,
      params: { line: line.slice(0, 4096), truncated: line.length > 4096, error: (error as Error).message },
    });
  }

  /** Bookkeeping for one agent message; returns a re-serialized line when an extension changed it, null to drop it. */
  private routeAgentMessage(message: JsonRpcMessage): string | undefined | null {
    const kind = kindOf(message);
    if (kind === "response") {
      const key = idKey(message.id as JsonRpcId);
      const waiter = this.pendingServer.get(key);
      if (waiter) {
        this.pendingServer.delete(key);
        waiter(message);
        return null;
      }
      const request = this.pendingClient.get(key);
      if (!request) return undefined;
      this.pendingClient.delete(key);
      this.trackSession(request, message);
      let changed = false;
      for (const ext of this.options.extensions) {
        const seen = ext.agentResponse?.(message, request, this);
        if (seen === "held") {
          // Its answer comes later (`emit`): the request stays recorded in flight until then.
          this.heldAnswers.add(key);
          return null;
        }
        changed = seen === true || changed;
      }
      // The answer is appended next (`onAgentLine`).
      this.settle(request.id as JsonRpcId);
      return changed ? this.reserialize(message) : undefined;
    }
    if (message.method === "session/update" && this.reattaching.size > 0) {
      const sessionId = sessionIdOf(message);
      if (sessionId !== undefined && this.reattaching.has(sessionId)) return null;
    }
    let dropped = false;
    for (const ext of this.options.extensions)
      dropped = ext.agentMessage?.(message, this) === true || dropped;
    if (dropped) return null;
    if (kind === "request") {
      const id = message.id as JsonRpcId;
      this.pendingAgent.set(idKey(id), { id, method: message.method!, sessionId: sessionIdOf(message) });
      // Recorded before the client can see it, so that a restart withdraws it.
      this.persist();
    }
    return undefined;
  }

  /** An agent message an extension changed; as the agent wrote it if it is too deep to serialize again. */
  private reserialize(message: JsonRpcMessage): string | undefined {
    try {
      return JSON.stringify(message);
    } catch (error) {
      this.logger.warn("forwarding an agent message unchanged: it cannot be serialized again", {
        connection: shortId(this.id),
        method: message.method,
        error: String(error),
      });
      return undefined;
    }
  }

  private trackSession(request: JsonRpcMessage, response: JsonRpcMessage): void {
    if (response.error || !request.method) return;
    const result = response.result;
    if (
      SESSION_RESULT_METHODS.has(request.method) &&
      isObject(result) &&
      typeof result.sessionId === "string"
    ) {
      this.addSession(result.sessionId, request.params);
    } else if (SESSION_PARAM_METHODS.has(request.method) && isObject(request.params)) {
      const id = request.params.sessionId;
      if (typeof id === "string") this.addSession(id, request.params);
    }
  }

  private addSession(sessionId: string, params: unknown): void {
    this.sessionIds.add(sessionId);
    const cwd = isObject(params) && typeof params.cwd === "string" ? params.cwd : undefined;
    this.sessionCwds.set(sessionId, cwd);
    this.persistAfterCommit();
  }

  private append(data: string): void {
    if (this.state === "closed") return;
    this.outbound.append(data);
    this.options.observer?.event();
  }

  /** An agent's line as its UTF-8 bytes (copied into the log). */
  private appendBytes(bytes: Uint8Array, start: number, end: number): void {
    if (this.state === "closed") return;
    this.outbound.appendBytes(bytes, start, end);
    this.options.observer?.event();
  }

  private onAgentExit(exit: AgentExit): void {
    this.exit = exit;
    this.failServerRequests("The agent process exited before answering.");
    this.end({
      reason: "agent_exited",
      message: "The agent process exited before answering.",
      data: { exitCode: exit.code, signal: exit.signal, stderrTail: exit.stderrTail },
    });
  }

  private failServerRequests(message: string): void {
    for (const [key, resolve] of this.pendingServer) resolve(errorResponse(key.slice(2), -32603, message));
    this.pendingServer.clear();
  }

  /**
   * The agent is gone for good, or the server ended the connection: every pending client request
   * gets a JSON-RPC error saying why, each session a `_sandboxagent/session/ended`, then the stream
   * ends once drained and the id answers 410 for `endedRetentionMs`.
   */
  private end(ending: ConnectionEnd): void {
    if (this.state !== "open") return;
    this.state = "ended";
    const data = { reason: ending.reason, ...ending.data };
    this.ending = { ...ending, data };
    this.failServerRequests(ending.message);
    // Each error takes its request out of `pendingClient` (`emit`).
    for (const request of this.pendingClient.values())
      this.emit(errorResponse(request.id as JsonRpcId, -32603, ending.message, data));
    for (const ext of this.options.extensions) ext.sessionsEnded?.(this, this.exit);
    const sessions = this.sessionIds.size > 0 ? [...this.sessionIds] : [undefined];
    for (const sessionId of sessions) {
      this.emit({ jsonrpc: "2.0", method: METHODS.ended, params: { sessionId, ...data } });
    }
    this.outbound.end();
    this.persistAfterCommit();
    this.scheduleClose();
  }

  /** An ended connection stays readable (and answers 410 with its reason) for `endedRetentionMs`. */
  private scheduleClose(): void {
    this.endedTimer = setTimeout(() => void this.close("ended"), this.options.limits.endedRetentionMs);
    this.endedTimer.unref();
  }
}

/**
 * Event data must stay one SSE line: SSE readers end a line at CR, LF or CRLF, so a raw CR would
 * cut the message in two and lose it. Agent lines are split at LF already, and a raw CR can only
 * sit in valid JSON as whitespace between tokens (inside a string it must be escaped), so removing
 * it changes the bytes, never the message. Fast-path lines (`content-chunk.ts`) and the server's
 * own JSON.stringify output never contain one; U+2028/2029 are no line breaks to SSE.
 */
function withoutRawCarriageReturns(line: string): string {
  return line.includes("\r") ? line.replaceAll("\r", "") : line;
}
