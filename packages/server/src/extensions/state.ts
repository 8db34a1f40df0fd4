import type { ConnectionApi } from "../runtime/extension.js";
import { isObject } from "../protocol.js";
import type { StateTable } from "../store/event-store.js";

/** What the server remembers about a session, across connections (and restarts, with a data directory). */
export interface SessionRecord {
  readonly agentId: string;
  readonly sessionId: string;
  cwd: string | undefined;
  /** When the server first saw the session (ISO 8601). */
  readonly createdAt: string;
  /** Last update, metadata change or lifecycle change the server saw (epoch ms: it changes with every update, the ISO string is made only when listed). */
  updatedMs: number;
  ended: boolean;
  /** `session/update` notifications the agent sent for the session. */
  eventCount: number;
  /** Last title the agent announced in a `session_info_update`. */
  agentTitle: string | undefined;
  /** Client metadata (`_meta["sandboxagent.dev"]` of session/new, `set_metadata`). */
  metadata: Record<string, unknown>;
}

/** Records are small, but a long-lived server must not grow without bound: the oldest are evicted. */
const MAX_RECORDS = 10_000;

/**
 * Server-wide session records, keyed by agent and session id, kept in `table` (on disk with a
 * data directory, so `session/list` and the metadata methods answer the same after a restart).
 */
export class SessionStore {
  // Two levels instead of one composite key: `touch` runs for every session/update, and must not
  // build a key string each time.
  private readonly byAgent = new Map<string, Map<string, SessionRecord>>();
  /** Every record, oldest first, for eviction. */
  private readonly order = new Set<SessionRecord>();
  /** Each record's key in `table`. */
  private readonly keys = new WeakMap<SessionRecord, string>();
  /**
   * The record `touch` returned last in this turn of the event loop: the lines of one chunk of
   * agent output are mostly updates of one session, so the rest skip the lookups and the `changed`
   * mark (the first made it; a checkpoint runs in a turn of its own, and `save` forgets the record).
   */
  private recent: SessionRecord | undefined;

  constructor(private readonly table?: StateTable<SessionRecord>) {
    if (!table) return;
    const records = [...table.entries()].sort(([, a], [, b]) => a.updatedMs - b.updatedMs);
    for (const [key, record] of records) this.add(record, key);
  }

  get(agentId: string, sessionId: string): SessionRecord | undefined {
    return this.byAgent.get(agentId)?.get(sessionId);
  }

  /** Writes `record` now (a change the client made or must find after a crash). */
  save(record: SessionRecord): void {
    if (record === this.recent) this.recent = undefined; // the write cleared its `changed` mark
    this.table?.set(this.keys.get(record)!, record);
  }

  /** `record` changed (counters, times): written with the store's next checkpoint, about once a second. */
  changed(record: SessionRecord): void {
    this.table?.changed(this.keys.get(record)!);
  }

  /**
   * The record, created on first sight; marked changed (its caller updates it) and its update
   * time stamped. Both once per turn of the event loop: the updates of one chunk of agent output
   * arrive within microseconds of each other, and reading the clock for each was ~1 % of the
   * server's CPU per streamed event.
   */
  touch(agentId: string, sessionId: string): SessionRecord {
    const recent = this.recent;
    if (recent !== undefined && recent.sessionId === sessionId && recent.agentId === agentId) return recent;
    let record = this.byAgent.get(agentId)?.get(sessionId);
    if (!record) {
      const now = Date.now();
      record = {
        agentId,
        sessionId,
        cwd: undefined,
        createdAt: new Date(now).toISOString(),
        updatedMs: now,
        ended: false,
        eventCount: 0,
        agentTitle: undefined,
        metadata: {},
      };
      this.add(record, `${agentId}/${sessionId}`);
      this.save(record);
      if (this.order.size > MAX_RECORDS) this.evictOldest();
    }
    // Marked even when just saved: the caller updates it after this.
    this.changed(record);
    record.updatedMs = Date.now();
    if (recent === undefined) queueMicrotask(() => (this.recent = undefined));
    this.recent = record;
    return record;
  }

  private add(record: SessionRecord, key: string): void {
    let sessions = this.byAgent.get(record.agentId);
    if (!sessions) this.byAgent.set(record.agentId, (sessions = new Map()));
    sessions.set(record.sessionId, record);
    this.order.add(record);
    this.keys.set(record, key);
  }

  private evictOldest(): void {
    const oldest = this.order.values().next().value!;
    if (oldest === this.recent) this.recent = undefined;
    this.order.delete(oldest);
    this.byAgent.get(oldest.agentId)?.delete(oldest.sessionId);
    this.table?.delete(this.keys.get(oldest)!);
  }
}

/** What the agent told this connection about a session's model and mode. */
export interface AgentSessionState {
  configOptions: unknown[] | undefined;
  /** The unstable `models` field (`{currentModelId, availableModels}`) of session/new|load. */
  models: Record<string, unknown> | undefined;
  /** The `modes` field (`{currentModeId, availableModes}`). */
  modes: Record<string, unknown> | undefined;
}

/**
 * What the index keeps of a connection's extension state (with a data directory), so that a
 * restarted server answers the same: the sessions it saw, which are muted, and what the agent last reported
 * about each session's model and mode. Plain JSON; nothing secret (the agent's own answers).
 */
export interface SavedConnectionState {
  /** `seen`: ended sessions included, which the connection's record no longer lists. */
  seen: string[];
  muted: string[];
  agent: Record<string, AgentSessionState>;
}

/** Per-connection extension state. */
export class ConnectionState {
  /** Every session seen on this connection, ended ones included, for the `session/list` fallback. */
  readonly seen = new Set<string>();
  /** Sessions whose `session/update`s are dropped (detached or terminated). */
  readonly muted = new Set<string>();
  /**
   * Sessions whose creation answer is held while the `model`/`mode` asked for at creation is
   * applied: their updates meanwhile (the switch's own notifications) are absorbed, not shown; the
   * answer carries the outcome.
   */
  readonly applying = new Set<string>();
  readonly agent = new Map<string, AgentSessionState>();
  /** Agent permission requests the client has not answered: request id key → session id. */
  readonly pendingPermissions = new Map<string, { id: string | number; sessionId: string }>();
  /** Ids of agent requests the server answered itself; a late client answer is swallowed. */
  readonly serverAnswered = new Set<string>();
  agentLists = false;
  agentCloses = false;

  constructor(
    /** Writes `muted` and `agent` to the index (a no-op without a data directory). */
    readonly save: () => void = () => {},
  ) {}

  /** The part of the state a restart must not lose. */
  saved(): SavedConnectionState {
    return { seen: [...this.seen], muted: [...this.muted], agent: Object.fromEntries(this.agent) };
  }

  /** Takes back what `saved` returned before a restart. */
  restore(saved: SavedConnectionState): void {
    for (const sessionId of saved.seen) this.seen.add(sessionId);
    for (const sessionId of saved.muted) this.muted.add(sessionId);
    for (const [sessionId, state] of Object.entries(saved.agent)) this.agent.set(sessionId, state);
  }

  agentState(sessionId: string): AgentSessionState {
    let state = this.agent.get(sessionId);
    if (!state) {
      state = { configOptions: undefined, models: undefined, modes: undefined };
      this.agent.set(sessionId, state);
    }
    return state;
  }

  /** Adopts `configOptions`/`models`/`modes` from a session/new|load|resume|fork or set_config_option result. */
  absorb(sessionId: string, result: unknown): void {
    if (!isObject(result)) return;
    const state = this.agentState(sessionId);
    if (Array.isArray(result.configOptions)) state.configOptions = result.configOptions;
    if (isObject(result.models)) state.models = result.models;
    if (isObject(result.modes)) state.modes = result.modes;
  }
}

/**
 * Per-connection state, released with the connection; what a restart must not lose is kept in
 * `table` by connection id (in the index, with a data directory) until `forget`.
 */
export class ConnectionStates {
  private readonly states = new WeakMap<ConnectionApi, ConnectionState>();

  constructor(private readonly table?: StateTable<SavedConnectionState>) {}

  of(conn: ConnectionApi): ConnectionState {
    let state = this.states.get(conn);
    if (!state) {
      const { table } = this;
      state = new ConnectionState(table ? () => table.set(conn.id, state!.saved()) : undefined);
      // A connection recovered after a restart already has sessions, and maybe saved state.
      for (const sessionId of conn.sessionIds) state.seen.add(sessionId);
      const saved = table?.get(conn.id);
      if (saved) state.restore(saved);
      this.states.set(conn, state);
    }
    return state;
  }

  /** The connection is gone for good: its saved state is deleted. */
  forget(connectionId: string): void {
    this.table?.delete(connectionId);
  }
}
