/**
 * The app-side store: which sandbox belongs to which key, which session runs where, and (optionally) a
 * mirror of each session's events. It lives in the application's processes only: sandboxes never see
 * it nor its credentials. Every replica of an application that shares one store sees the same
 * sandboxes and sessions; leases and capacity admission are atomic in the store, so replicas never
 * create, resume or reap the same sandbox twice.
 *
 * Times are milliseconds since the epoch, taken from the store's clock (the database's for a shared
 * store), so replicas with skewed clocks still agree on leases and idleness.
 */

// ─── Sandboxes ──────────────────────────────────────────────────────────────────────────────────

/**
 * `pending`: the key is claimed, no sandbox exists yet. `starting`: being created or resumed.
 * `running`: up. `stopping`: being stopped or destroyed. `stopped`: kept for resume.
 * `starting`, `running` and `stopping` hold one of the provider's capacity slots (see {@link LIVE_STATUSES}).
 */
export type SandboxStatus = "pending" | "starting" | "running" | "stopping" | "stopped";

/** The statuses that count against a provider's capacity: the sandbox exists and may be running. */
export const LIVE_STATUSES: readonly SandboxStatus[] = ["starting", "running", "stopping"];

/** Who may change a sandbox right now, until when. An expired lease is free for anyone to take. */
export interface SandboxLease {
  owner: string;
  expiresAt: number;
}

export interface SandboxRecord {
  /** The application's name for the sandbox (e.g. a chat id); unique in the store. */
  key: string;
  /** The provider's name (`local-process`, `docker`, …). A key belongs to one provider for life. */
  provider: string;
  /** The provider's own id (container id, pod name, directory), once created. */
  providerId: string | null;
  /** Where the app reaches the sandbox's server (a base URL), if it has one. Never credentials. */
  endpoint: string | null;
  status: SandboxStatus;
  lease: SandboxLease | null;
  metadata: Record<string, unknown>;
  createdAt: number;
  updatedAt: number;
  /** Last activity reported with `touch` (or a start); the idle reaper compares it with its TTL. */
  lastActiveAt: number;
}

/** Fields a lease holder may change. `touch: true` also sets `lastActiveAt` to now. */
export interface SandboxPatch {
  providerId?: string | null;
  endpoint?: string | null;
  status?: SandboxStatus;
  metadata?: Record<string, unknown>;
  touch?: boolean;
}

export interface AcquireOptions {
  /** Lease holder id, unique per process (e.g. host, pid and a random suffix). */
  owner: string;
  ttlMs: number;
  /**
   * Provider of a record created by this call. When given and the key has no record, a `pending`
   * record is inserted; when omitted, only an existing record can be leased.
   */
  provider?: string;
  /** Only lease a record in one of these statuses. */
  status?: readonly SandboxStatus[];
  /** Only lease a record idle at least this long (by the store's clock). */
  idleForMs?: number;
}

export interface ListSandboxesOptions {
  provider?: string;
  status?: readonly SandboxStatus[];
  /** Only records idle at least this long. */
  idleForMs?: number;
  /** Only records whose lease expired (a holder that crashed mid-operation), or `false`: none that did. */
  leaseExpired?: boolean;
}

/** Why admission did not happen yet: for the waiting caller's progress and its timeout error. */
export interface AdmitResult {
  admitted: boolean;
  /** Live sandboxes of the provider (before this admission). */
  live: number;
  /** Waiting requests ahead of this one (all replicas). */
  ahead: number;
}

export interface AdmitOptions {
  key: string;
  owner: string;
  ticket: number;
  provider: string;
  /** At most this many live sandboxes of `provider` (see {@link LIVE_STATUSES}). */
  limit: number;
  /** Lease and ticket are extended by this much on every attempt. */
  ttlMs: number;
}

/** A change of a sandbox record: a status, a lease or a removal. Lets waiters wake at once. */
export interface SandboxChange {
  key: string;
  provider: string;
}

export interface SandboxStore {
  get(key: string): Promise<SandboxRecord | undefined>;
  list(options?: ListSandboxesOptions): Promise<SandboxRecord[]>;
  /**
   * Takes the lease on `key` for `options.owner` when it is free, expired, or theirs already (and the
   * record matches `status`/`idleForMs`); returns the leased record, or undefined when it is not taken.
   * Atomic: of several replicas asking at once, one gets it.
   */
  acquire(key: string, options: AcquireOptions): Promise<SandboxRecord | undefined>;
  /** Extends a lease; false when `owner` no longer holds it. */
  renew(key: string, owner: string, ttlMs: number): Promise<boolean>;
  /** Changes a record under the lease; throws {@link LeaseLostError} when `owner` does not hold it. */
  update(key: string, owner: string, patch: SandboxPatch): Promise<SandboxRecord>;
  /** Applies `patch` and frees the lease; throws {@link LeaseLostError} when `owner` does not hold it. */
  release(key: string, owner: string, patch?: SandboxPatch): Promise<SandboxRecord>;
  /** Deletes the record under the lease; throws {@link LeaseLostError} when `owner` does not hold it. */
  remove(key: string, owner: string): Promise<void>;
  /** Records activity now (no lease needed); false when there is no such record. */
  touch(key: string): Promise<boolean>;
  /** Joins the provider's FIFO queue for a capacity slot; returns the ticket. Expires unless `admit` renews it. */
  enqueue(provider: string, owner: string, ttlMs: number): Promise<number>;
  /**
   * Admits the leased `key` when its ticket is first in line and the provider has a free slot: the
   * record becomes `starting` and the ticket is spent. Otherwise renews the ticket and says why not.
   */
  admit(options: AdmitOptions): Promise<AdmitResult>;
  /** Leaves the queue (timeout, abort); no error when the ticket is gone. */
  dequeue(ticket: number): Promise<void>;
  /**
   * Calls `listener` after records change (any replica, for a shared store): a hint to re-check,
   * not a guarantee; waiters also poll. Returns the unsubscribe function.
   */
  watch(listener: (change: SandboxChange) => void): () => void;
}

// ─── Sessions ───────────────────────────────────────────────────────────────────────────────────

export interface SessionRecord {
  /** The application's session id (e.g. a chat thread id); unique in the store. */
  id: string;
  sandboxKey: string;
  /** Agent id on the sandbox's server (`claude`, `codex`, `mock`…). */
  agent: string;
  /** The server's connection id the session runs on (to reattach), once connected. */
  connectionId: string | null;
  /** The agent's (ACP) session id, once created. */
  agentSessionId: string | null;
  metadata: Record<string, unknown>;
  /**
   * The server's id of the last event recorded for this session: set by `events.append` with the
   * last appended event's `eventId`, or by `update`. A replica resumes the server's stream from here.
   */
  lastEventId: string | null;
  /** Sequence number of the last mirrored event; 0 when none. */
  lastSeq: number;
  createdAt: number;
  updatedAt: number;
}

export interface NewSession {
  id: string;
  sandboxKey: string;
  agent: string;
  connectionId?: string | null;
  agentSessionId?: string | null;
  metadata?: Record<string, unknown>;
  lastEventId?: string | null;
}

export type SessionPatch = Partial<
  Pick<SessionRecord, "sandboxKey" | "connectionId" | "agentSessionId" | "metadata" | "lastEventId">
>;

export interface ListSessionsOptions {
  sandboxKey?: string;
}

export interface SessionRecords {
  /** Creates the session; throws {@link SessionExistsError} when the id is taken. */
  create(session: NewSession): Promise<SessionRecord>;
  get(id: string): Promise<SessionRecord | undefined>;
  /** Oldest first. */
  list(options?: ListSessionsOptions): Promise<SessionRecord[]>;
  /** Replaces the given fields (`metadata` as a whole); throws {@link UnknownSessionError}. */
  update(id: string, patch: SessionPatch): Promise<SessionRecord>;
  /** Deletes the session and its mirrored events; no error when it does not exist. */
  delete(id: string): Promise<void>;
}

// ─── Event mirror ───────────────────────────────────────────────────────────────────────────────

export interface NewEvent {
  /** Any JSON value. */
  data: unknown;
  /** The server's event id (SSE `id`), when the event came from a server stream. */
  eventId?: string;
}

export interface StoredEvent {
  sessionId: string;
  /** 1, 2, 3… per session, without gaps. */
  seq: number;
  eventId: string | null;
  data: unknown;
  createdAt: number;
}

export interface AppendOptions {
  /**
   * The session's `lastEventId` after this append, when it is not the last given `eventId`: a
   * client that must see some of these events again after a takeover (an agent request it has not
   * answered yet) keeps the resume point before them. `null` clears it.
   */
  lastEventId?: string | null;
}

export interface ReadEventsOptions {
  /** Events after this sequence number (default 0: from the start). */
  after?: number;
  /** At most this many (default 1,000). */
  limit?: number;
}

export interface SubscribeOptions {
  /** Deliver events after this sequence number (default 0: the whole history, then live). */
  after?: number;
  /** Called when reading fails or the live connection drops; delivery retries by itself. */
  onError?: (error: Error) => void;
}

export interface EventSubscription {
  /** Sequence number of the last event delivered. */
  readonly cursor: number;
  close(): void;
}

/**
 * A mirror of each session's events: batched appends, read back by cursor, followed live. A
 * subscriber gets every event once, in order, across replicas (for a shared store) and across
 * dropped connections of its own.
 */
export interface EventMirror {
  /**
   * Appends in order, atomically; sets the session's `lastEventId` to the last `eventId` given (or
   * to `options.lastEventId`). Throws {@link UnknownSessionError} when the session does not exist.
   */
  append(
    sessionId: string,
    events: readonly NewEvent[],
    options?: AppendOptions,
  ): Promise<{ firstSeq: number; lastSeq: number }>;
  read(sessionId: string, options?: ReadEventsOptions): Promise<StoredEvent[]>;
  /**
   * Delivers the session's events after `options.after`, history first, then live, in batches; the
   * next batch waits until the listener's promise settles.
   */
  subscribe(
    sessionId: string,
    listener: (events: StoredEvent[]) => void | Promise<void>,
    options?: SubscribeOptions,
  ): EventSubscription;
}

// ─── The store ──────────────────────────────────────────────────────────────────────────────────

export interface SessionStore {
  readonly sandboxes: SandboxStore;
  readonly sessions: SessionRecords;
  /** Absent in drivers without a mirror: history then comes from the server's own event log. */
  readonly events?: EventMirror;
  /** Releases connections and timers; subscriptions end. */
  close(): Promise<void>;
}
