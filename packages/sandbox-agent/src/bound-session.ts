/**
 * A client bound to a session of a shared `SessionStore`: the record says which server connection
 * and agent session the chat runs on, so any replica of the application can take it over; the
 * mirror keeps its events for followers. The store lives in the application only: nothing here
 * reaches the sandbox except the HTTP connection itself.
 */
import { PROTOCOL_VERSION } from "@agentclientprotocol/sdk";
import type { SessionRecord, SessionStore } from "@sandbox-agent/session-store";
import { AcpConnectionLostError, AcpHttpError } from "acp-http-client";
import { openConnection, type OpenConnection, type OpenConnectionOptions } from "./connection.js";
import { META_KEY, isRecord } from "./metadata.js";
import { SessionMirror, lastMirroredEventId } from "./mirror.js";

/** Longest wait for the mirror's last writes when the client disconnects (a store that is down). */
const FLUSH_TIMEOUT_MS = 5_000;
/** Longest wait for a new connection's event stream to open before `connect()` resolves anyway. */
const POSITION_TIMEOUT_MS = 10_000;

const delay = (ms: number): Promise<void> =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    // Node's timers can be unref'd (do not keep the process alive); browsers' are plain numbers.
    if (typeof timer === "object") timer.unref();
  });

export interface BindingOptions {
  store: SessionStore;
  /** The session's id in the store. */
  sessionId: string;
  /** The record's sandbox key, for a record this client creates. */
  sandboxKey: string | undefined;
  agent: string;
  onError(error: Error): void;
}

type ConnectionOptions = Omit<OpenConnectionOptions, "attach" | "observe" | "onEventId" | "adoptedSession">;

export class BoundSession {
  #agentSessionId: string | null = null;
  #mirror: SessionMirror | undefined;

  constructor(private readonly options: BindingOptions) {}

  /** The agent (ACP) session recorded for this session, once known. */
  get agentSessionId(): string | null {
    return this.#agentSessionId;
  }

  /**
   * Takes over the recorded connection (its events after the recorded resume point), or opens a new
   * one when there is none or the server no longer has it (restarted, expired, agent exited); a new
   * connection reopens the recorded agent session where the agent can (`session/resume`, else
   * `session/load`). The record is created or updated before this resolves.
   */
  async open(base: ConnectionOptions): Promise<OpenConnection> {
    const { store, sessionId } = this.options;
    const record = await store.sessions.get(sessionId);
    if (record === undefined) this.#checkNewRecord();
    this.#agentSessionId = record?.agentSessionId ?? null;
    if (record?.connectionId) {
      const attached = await this.#attach(base, record, record.connectionId);
      if (attached) return attached;
    }
    const mirror = this.#newMirror(null, null);
    const connection = await openConnection({ ...base, ...this.#hooks(mirror) });
    try {
      const connectionId = connection.rpc.connectionId!;
      if (record) await store.sessions.update(sessionId, { connectionId, lastEventId: null });
      else
        await store.sessions.create({
          id: sessionId,
          sandboxKey: this.options.sandboxKey!,
          agent: this.options.agent,
          connectionId,
        });
    } catch (error) {
      mirror.close();
      await connection.rpc.close().catch(() => undefined);
      throw error;
    }
    mirror.start();
    // The stream's first position (its priming event) is the resume point until events arrive: once
    // it is recorded, a replica taking over misses nothing even if this one dies at once.
    await Promise.race([mirror.positioned, delay(POSITION_TIMEOUT_MS)]);
    await mirror.flush();
    if (record?.agentSessionId) await this.#reopen(connection, record, mirror);
    return connection;
  }

  /** Records the agent session this client created or opened (and its cwd, to reopen it later). */
  async recordAgentSession(agentSessionId: string, cwd: string): Promise<void> {
    const { store, sessionId } = this.options;
    const record = await store.sessions.get(sessionId);
    const ours = isRecord(record?.metadata[META_KEY]) ? record.metadata[META_KEY] : {};
    await store.sessions.update(sessionId, {
      agentSessionId,
      metadata: { ...record?.metadata, [META_KEY]: { ...ours, cwd } },
    });
    this.#agentSessionId = agentSessionId;
  }

  /** Writes what is left of the mirror (bounded); `ended`: the connection is gone, forget it. */
  async close(ended: boolean): Promise<void> {
    const mirror = this.#mirror;
    this.#mirror = undefined;
    if (mirror) {
      await Promise.race([mirror.flush(), delay(FLUSH_TIMEOUT_MS)]);
      mirror.close();
    }
    if (ended) await this.options.store.sessions.update(this.options.sessionId, { connectionId: null });
  }

  /** Undefined when the server no longer has the connection: then a new one is opened. */
  async #attach(
    base: ConnectionOptions,
    record: SessionRecord,
    connectionId: string,
  ): Promise<OpenConnection | undefined> {
    const skipThrough = await lastMirroredEventId(this.options.store, this.options.sessionId);
    const mirror = this.#newMirror(record.lastEventId, skipThrough);
    try {
      const connection = await openConnection({
        ...base,
        ...this.#hooks(mirror),
        attach: { connectionId, protocolVersion: PROTOCOL_VERSION, lastEventId: record.lastEventId },
      });
      mirror.start();
      return connection;
    } catch (error) {
      mirror.close();
      this.#mirror = undefined;
      if (gone(error)) return undefined;
      throw error;
    }
  }

  async #reopen(connection: OpenConnection, record: SessionRecord, mirror: SessionMirror): Promise<void> {
    const agentSessionId = record.agentSessionId!;
    const ours = record.metadata[META_KEY];
    const cwd = isRecord(ours) && typeof ours.cwd === "string" ? ours.cwd : undefined;
    const caps = connection.initializeResult?.agentCapabilities;
    const params = { sessionId: agentSessionId, cwd: cwd ?? "/", mcpServers: [] };
    try {
      if (cwd === undefined) throw new Error("its working directory was not recorded");
      if (caps?.sessionCapabilities?.resume) await connection.rpc.resumeSession(params);
      // Its history replay is in the mirror already.
      else if (caps?.loadSession) await mirror.suppress(() => connection.rpc.loadSession(params));
      else throw new Error("the agent supports neither session/resume nor session/load");
    } catch (error) {
      this.options.onError(
        new Error(
          `session "${this.options.sessionId}": the agent session ${agentSessionId} could not be ` +
            `reopened on a new connection (${(error as Error).message}); create a new one`,
          { cause: error },
        ),
      );
      this.#agentSessionId = null;
      await this.options.store.sessions.update(this.options.sessionId, { agentSessionId: null });
    }
  }

  #newMirror(resumeFrom: string | null, skipThrough: string | null): SessionMirror {
    this.#mirror = new SessionMirror({
      store: this.options.store,
      sessionId: this.options.sessionId,
      agentSessionId: () => this.#agentSessionId,
      resumeFrom,
      skipThrough,
      onError: this.options.onError,
    });
    return this.#mirror;
  }

  #hooks(mirror: SessionMirror): Pick<OpenConnectionOptions, "observe" | "onEventId" | "adoptedSession"> {
    return {
      observe: (envelope) => mirror.observe(envelope),
      onEventId: (eventId) => mirror.position(eventId),
      adoptedSession: () => this.#agentSessionId,
    };
  }

  #checkNewRecord(): void {
    if (this.options.sandboxKey !== undefined) return;
    throw new TypeError(
      `SandboxAgentClient: session "${this.options.sessionId}" is not in the store yet: pass sandboxKey ` +
        "(the key of the sandbox it runs in) to create its record",
    );
  }
}

/** The server no longer has the connection (404 unknown or expired, 410 agent exited or cursor evicted). */
function gone(error: unknown): boolean {
  const lost = (error as { cause?: unknown }).cause ?? error;
  return (
    lost instanceof AcpConnectionLostError && lost.cause instanceof AcpHttpError && lost.cause.connectionLost
  );
}
