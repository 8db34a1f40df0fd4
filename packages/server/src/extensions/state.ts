import type { ConnectionApi } from "../runtime/extension.js";
import { isObject } from "../protocol.js";
import { absorbSwitch } from "./models.js";
import type { StateTable } from "../store/event-store.js";
import { microtask } from "../runtime/microtask.js";

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
  /**
   * The session id `recent` was asked for, the string passed in: a run of text chunks passes the
   * same one (`runtime/content-chunk.ts`), which compares by identity, where the record's own id,
   * an equal string, was compared character by character for every event (~1 % of the server's
   * CPU per streamed event).
   */
  private recentSessionId = "";
  /** Forgets `recent` at the end of the turn: one function for every turn, not a closure each. */
  private readonly forgetRecent = (): void => {
    this.recent = undefined;
  };

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
    if (recent !== undefined && sessionId === this.recentSessionId && recent.agentId === agentId)
      return recent;
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
    if (recent === undefined) microtask(this.forgetRecent);
    this.recent = record;
    this.recentSessionId = sessionId;
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

/** A successful `session/set_mode`, `set_model` or `set_config_option`, with the agent's result. */
export interface AnsweredSwitch {
  method: string;
  params: Record<string, unknown>;
  result: unknown;
}

/**
 * Per-connection extension state. What a restart must not lose (`seen`, `muted`, `agent`) is
 * changed only through this class's mutators, and `commit` alone decides when it is written: once
 * per mutation that changed it, never for one that changed nothing, never per prompt or update.
 */
export class ConnectionState {
  private readonly seenIds = new Set<string>();
  private readonly mutedIds = new Set<string>();
  private readonly agent = new Map<string, AgentSessionState>();
  /**
   * Sessions whose creation answer is held while the `model`/`mode` asked for at creation is
   * applied: their updates meanwhile (the switch's own notifications) are absorbed, not shown; the
   * answer carries the outcome.
   */
  readonly applying = new Set<string>();
  /** Agent permission requests the client has not answered: request id key → session id. */
  readonly pendingPermissions = new Map<string, { id: string | number; sessionId: string }>();
  /** Ids of agent requests the server answered itself; a late client answer is swallowed. */
  readonly serverAnswered = new Set<string>();
  agentLists = false;
  agentCloses = false;

  constructor(
    /** Writes the saved state to the index (none without a data directory). */
    private readonly write: (saved: SavedConnectionState) => void = () => {},
  ) {}

  /** Every session seen on this connection, ended ones included, for the `session/list` fallback. */
  get seen(): ReadonlySet<string> {
    return this.seenIds;
  }

  /** Sessions whose `session/update`s are dropped (detached or terminated). */
  get muted(): ReadonlySet<string> {
    return this.mutedIds;
  }

  /** The part of the state a restart must not lose. */
  saved(): SavedConnectionState {
    return { seen: [...this.seenIds], muted: [...this.mutedIds], agent: Object.fromEntries(this.agent) };
  }

  /** Takes back the sessions of a recovered connection and what `saved` returned before a restart (nothing is written). */
  restore(sessionIds: Iterable<string>, saved: SavedConnectionState | undefined): void {
    for (const sessionId of sessionIds) this.seenIds.add(sessionId);
    if (!saved) return;
    for (const sessionId of saved.seen) this.seenIds.add(sessionId);
    for (const sessionId of saved.muted) this.mutedIds.add(sessionId);
    for (const [sessionId, state] of Object.entries(saved.agent)) this.agent.set(sessionId, state);
  }

  /** What the agent reported about the session, if anything (nothing is created). */
  reported(sessionId: string): Readonly<AgentSessionState> | undefined {
    return this.agent.get(sessionId);
  }

  /**
   * What the agent reported about the session (created empty on first use, unwritten until it
   * holds something). The object stays the session's: it shows later changes.
   */
  agentState(sessionId: string): Readonly<AgentSessionState> {
    return this.agentEntry(sessionId);
  }

  /** A session created, loaded, resumed or forked here, with the agent's answer (`absorb`). */
  adopt(sessionId: string, result: unknown): void {
    const before = this.agentJson(sessionId);
    const added = this.addTo(this.seenIds, sessionId);
    this.absorbInto(sessionId, result);
    this.commit(added || this.agentJson(sessionId) !== before);
  }

  /** A session whose creation failed: no longer listed. */
  discard(sessionId: string): void {
    this.commit(this.seenIds.delete(sessionId));
  }

  /** The session's updates are dropped from now on. */
  mute(sessionId: string): void {
    this.commit(this.addTo(this.mutedIds, sessionId));
  }

  /** The session's updates are delivered again. */
  unmute(sessionId: string): void {
    this.commit(this.mutedIds.delete(sessionId));
  }

  /** Adopts `configOptions`/`models`/`modes` from a session/new|load|resume|fork or set_config_option result. */
  absorb(sessionId: string, result: unknown): void {
    if (!isObject(result)) return;
    this.changeAgent(sessionId, () => this.absorbInto(sessionId, result));
  }

  /** Records what successful switch requests changed (one write for them all). */
  absorbSwitches(sessionId: string, switches: readonly AnsweredSwitch[]): void {
    if (switches.length === 0) return;
    this.changeAgent(sessionId, (state) => {
      for (const s of switches) absorbSwitch(state, s.method, s.params, s.result);
    });
  }

  /** Keeps the tracked config options/mode in step with the agent's `session/update`s. */
  absorbUpdate(sessionId: string, update: Record<string, unknown>): void {
    // Runs for every update; streamed content (nearly all of them) must not even look the session up.
    if (update.sessionUpdate === "config_option_update" && Array.isArray(update.configOptions)) {
      const configOptions: unknown[] = update.configOptions;
      this.changeAgent(sessionId, (state) => (state.configOptions = configOptions));
    } else if (update.sessionUpdate === "current_mode_update") {
      this.changeAgent(sessionId, (state) => {
        if (state.modes) state.modes = { ...state.modes, currentModeId: update.currentModeId };
      });
    }
  }

  /** The one place that writes: the saved state, when a mutation changed it. */
  private commit(changed: boolean): void {
    if (changed) this.write(this.saved());
  }

  private addTo(set: Set<string>, sessionId: string): boolean {
    const size = set.size;
    return set.add(sessionId).size !== size;
  }

  /** Runs `change` on the session's agent state; written when its JSON differs after (the agent resends equal lists). */
  private changeAgent(sessionId: string, change: (state: AgentSessionState) => void): void {
    const before = this.agentJson(sessionId);
    change(this.agentEntry(sessionId));
    this.commit(this.agentJson(sessionId) !== before);
  }

  private absorbInto(sessionId: string, result: unknown): void {
    if (!isObject(result)) return;
    const state = this.agentEntry(sessionId);
    if (Array.isArray(result.configOptions)) state.configOptions = result.configOptions;
    if (isObject(result.models)) state.models = result.models;
    if (isObject(result.modes)) state.modes = result.modes;
  }

  /** An absent entry reads as an empty one: creating one changes nothing to write. */
  private agentJson(sessionId: string): string {
    return JSON.stringify(this.agent.get(sessionId) ?? {});
  }

  private agentEntry(sessionId: string): AgentSessionState {
    let state = this.agent.get(sessionId);
    if (!state) {
      state = { configOptions: undefined, models: undefined, modes: undefined };
      this.agent.set(sessionId, state);
    }
    return state;
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
    return this.states.get(conn) ?? this.create(conn);
  }

  /** `of` for a connection seen the first time (a function of its own: `of` runs on every message). */
  private create(conn: ConnectionApi): ConnectionState {
    const { table } = this;
    const state = new ConnectionState(table ? (saved) => table.set(conn.id, saved) : undefined);
    // A connection recovered after a restart already has sessions, and maybe saved state.
    state.restore(conn.sessionIds, table?.get(conn.id));
    this.states.set(conn, state);
    return state;
  }

  /** The connection is gone for good: its saved state is deleted. */
  forget(connectionId: string): void {
    this.table?.delete(connectionId);
  }
}
