import { LeaseLostError, SessionExistsError, UnknownSessionError, checkId } from "./errors.js";
import { Subscribers, type EventPump } from "./subscription.js";
import {
  LIVE_STATUSES,
  type AcquireOptions,
  type AdmitOptions,
  type AdmitResult,
  type AppendOptions,
  type EventMirror,
  type ListSandboxesOptions,
  type NewEvent,
  type NewSession,
  type SandboxChange,
  type SandboxPatch,
  type SandboxRecord,
  type SandboxStore,
  type SessionPatch,
  type SessionRecord,
  type SessionRecords,
  type SessionStore,
  type StoredEvent,
  type SubscribeOptions,
} from "./types.js";

/**
 * The embedded default: everything in this process's memory. Leases, capacity admission and the event
 * mirror behave as in a shared store, but only for this process: a second replica, or this one after a
 * restart, sees nothing of it. Use a shared driver (PostgreSQL) for several replicas.
 */
export function memorySessionStore(): SessionStore {
  const sessions = new MemorySessions();
  const events = new MemoryEvents(sessions);
  return { sandboxes: new MemorySandboxes(), sessions, events, close: async () => events.closeAll() };
}

const copy = <T extends object>(value: T): T => structuredClone(value);

interface Ticket {
  ticket: number;
  provider: string;
  expiresAt: number;
}

class MemorySandboxes implements SandboxStore {
  readonly #records = new Map<string, SandboxRecord>();
  readonly #queue: Ticket[] = [];
  readonly #watchers = new Set<(change: SandboxChange) => void>();
  #nextTicket = 1;

  async get(key: string): Promise<SandboxRecord | undefined> {
    const record = this.#records.get(key);
    return record && copy(record);
  }

  async list(options: ListSandboxesOptions = {}): Promise<SandboxRecord[]> {
    const now = Date.now();
    return [...this.#records.values()]
      .filter(
        (r) =>
          (options.provider === undefined || r.provider === options.provider) &&
          (options.status === undefined || options.status.includes(r.status)) &&
          (options.idleForMs === undefined || now - r.lastActiveAt >= options.idleForMs) &&
          (options.leaseExpired === undefined || leaseExpired(r, now) === options.leaseExpired),
      )
      .sort((a, b) => a.createdAt - b.createdAt)
      .map(copy);
  }

  async acquire(key: string, options: AcquireOptions): Promise<SandboxRecord | undefined> {
    checkId("sandbox key", key);
    const now = Date.now();
    let record = this.#records.get(key);
    if (record === undefined) {
      if (options.provider === undefined) return undefined;
      record = {
        key,
        provider: options.provider,
        providerId: null,
        endpoint: null,
        status: "pending",
        lease: null,
        metadata: {},
        createdAt: now,
        updatedAt: now,
        lastActiveAt: now,
      };
      this.#records.set(key, record);
    }
    const free =
      record.lease === null || record.lease.expiresAt <= now || record.lease.owner === options.owner;
    if (!free) return undefined;
    if (options.status !== undefined && !options.status.includes(record.status)) return undefined;
    if (options.idleForMs !== undefined && now - record.lastActiveAt < options.idleForMs) return undefined;
    record.lease = { owner: options.owner, expiresAt: now + options.ttlMs };
    record.updatedAt = now;
    return copy(record);
  }

  async renew(key: string, owner: string, ttlMs: number): Promise<boolean> {
    const record = this.#held(key, owner);
    if (record === undefined) return false;
    record.lease = { owner, expiresAt: Date.now() + ttlMs };
    return true;
  }

  async update(key: string, owner: string, patch: SandboxPatch): Promise<SandboxRecord> {
    const record = this.#held(key, owner);
    if (record === undefined) throw new LeaseLostError(key, owner);
    applyPatch(record, patch);
    this.#changed(record);
    return copy(record);
  }

  async release(key: string, owner: string, patch: SandboxPatch = {}): Promise<SandboxRecord> {
    const record = this.#held(key, owner);
    if (record === undefined) throw new LeaseLostError(key, owner);
    applyPatch(record, patch);
    record.lease = null;
    this.#changed(record);
    return copy(record);
  }

  async remove(key: string, owner: string): Promise<void> {
    const record = this.#held(key, owner);
    if (record === undefined) throw new LeaseLostError(key, owner);
    this.#records.delete(key);
    this.#changed(record);
  }

  async touch(key: string): Promise<boolean> {
    const record = this.#records.get(key);
    if (record !== undefined) record.lastActiveAt = Date.now();
    return record !== undefined;
  }

  async enqueue(provider: string, _owner: string, ttlMs: number): Promise<number> {
    const ticket = this.#nextTicket++;
    this.#queue.push({ ticket, provider, expiresAt: Date.now() + ttlMs });
    return ticket;
  }

  async admit(options: AdmitOptions): Promise<AdmitResult> {
    const now = Date.now();
    for (let i = this.#queue.length - 1; i >= 0; i--) {
      if (this.#queue[i]!.expiresAt <= now) this.#queue.splice(i, 1);
    }
    const line = this.#queue.filter((t) => t.provider === options.provider);
    const mine = line.find((t) => t.ticket === options.ticket);
    const ahead = line.filter((t) => t.ticket < options.ticket).length;
    const live = [...this.#records.values()].filter(
      (r) => r.provider === options.provider && LIVE_STATUSES.includes(r.status),
    ).length;
    const record = this.#held(options.key, options.owner);
    if (record === undefined) throw new LeaseLostError(options.key, options.owner);
    if (mine === undefined) throw new Error(`capacity ticket ${options.ticket} expired: enqueue again`);
    record.lease = { owner: options.owner, expiresAt: now + options.ttlMs };
    if (ahead > 0 || live >= options.limit) {
      mine.expiresAt = now + options.ttlMs;
      return { admitted: false, live, ahead };
    }
    this.#queue.splice(this.#queue.indexOf(mine), 1);
    applyPatch(record, { status: "starting" });
    this.#changed(record);
    return { admitted: true, live, ahead };
  }

  async dequeue(ticket: number): Promise<void> {
    const index = this.#queue.findIndex((t) => t.ticket === ticket);
    if (index === -1) return;
    const [gone] = this.#queue.splice(index, 1);
    // The next in line may be admitted now.
    this.#emit({ key: "", provider: gone!.provider });
  }

  watch(listener: (change: SandboxChange) => void): () => void {
    this.#watchers.add(listener);
    return () => this.#watchers.delete(listener);
  }

  #held(key: string, owner: string): SandboxRecord | undefined {
    const record = this.#records.get(key);
    const lease = record?.lease;
    return lease && lease.owner === owner && lease.expiresAt > Date.now() ? record : undefined;
  }

  #changed(record: SandboxRecord): void {
    this.#emit({ key: record.key, provider: record.provider });
  }

  #emit(change: SandboxChange): void {
    // Like a notification from a shared store: after the change, never inside the caller's call.
    queueMicrotask(() => {
      for (const listener of this.#watchers) listener(change);
    });
  }
}

function leaseExpired(record: SandboxRecord, now: number): boolean {
  return record.lease !== null && record.lease.expiresAt <= now;
}

function applyPatch(record: SandboxRecord, patch: SandboxPatch): void {
  const now = Date.now();
  if (patch.providerId !== undefined) record.providerId = patch.providerId;
  if (patch.endpoint !== undefined) record.endpoint = patch.endpoint;
  if (patch.status !== undefined) record.status = patch.status;
  if (patch.metadata !== undefined) record.metadata = copy(patch.metadata);
  if (patch.touch) record.lastActiveAt = now;
  record.updatedAt = now;
}

interface SessionState {
  record: SessionRecord;
  events: StoredEvent[];
}

class MemorySessions implements SessionRecords {
  readonly states = new Map<string, SessionState>();

  async create(session: NewSession): Promise<SessionRecord> {
    checkId("session id", session.id);
    checkId("sandbox key", session.sandboxKey);
    if (this.states.has(session.id)) throw new SessionExistsError(session.id);
    const now = Date.now();
    const record: SessionRecord = {
      id: session.id,
      sandboxKey: session.sandboxKey,
      agent: session.agent,
      connectionId: session.connectionId ?? null,
      agentSessionId: session.agentSessionId ?? null,
      metadata: copy(session.metadata ?? {}),
      lastEventId: session.lastEventId ?? null,
      lastSeq: 0,
      createdAt: now,
      updatedAt: now,
    };
    this.states.set(session.id, { record, events: [] });
    return copy(record);
  }

  async get(id: string): Promise<SessionRecord | undefined> {
    const state = this.states.get(id);
    return state && copy(state.record);
  }

  async list(options: { sandboxKey?: string } = {}): Promise<SessionRecord[]> {
    return [...this.states.values()]
      .map((s) => s.record)
      .filter((r) => options.sandboxKey === undefined || r.sandboxKey === options.sandboxKey)
      .map(copy);
  }

  async update(id: string, patch: SessionPatch): Promise<SessionRecord> {
    const state = this.states.get(id);
    if (state === undefined) throw new UnknownSessionError(id);
    const defined = Object.entries(patch).filter(([, value]) => value !== undefined);
    Object.assign(state.record, copy(Object.fromEntries(defined)), { updatedAt: Date.now() });
    return copy(state.record);
  }

  async delete(id: string): Promise<void> {
    this.states.delete(id);
  }
}

class MemoryEvents implements EventMirror {
  readonly #subscribers = new Subscribers();

  constructor(private readonly sessions: MemorySessions) {}

  async append(
    sessionId: string,
    events: readonly NewEvent[],
    options: AppendOptions = {},
  ): Promise<{ firstSeq: number; lastSeq: number }> {
    const state = this.sessions.states.get(sessionId);
    if (state === undefined) throw new UnknownSessionError(sessionId);
    const now = Date.now();
    const firstSeq = state.record.lastSeq + 1;
    for (const event of events) {
      state.events.push({
        sessionId,
        seq: ++state.record.lastSeq,
        eventId: event.eventId ?? null,
        data: copy({ v: event.data }).v,
        createdAt: now,
      });
      if (event.eventId !== undefined) state.record.lastEventId = event.eventId;
    }
    if (options.lastEventId !== undefined) state.record.lastEventId = options.lastEventId;
    state.record.updatedAt = now;
    const lastSeq = state.record.lastSeq;
    // Like a notification from a shared store: after the append, never inside the caller's call.
    if (events.length > 0) queueMicrotask(() => this.#subscribers.wake(sessionId, lastSeq));
    return { firstSeq, lastSeq };
  }

  async read(sessionId: string, options: { after?: number; limit?: number } = {}): Promise<StoredEvent[]> {
    const events = this.sessions.states.get(sessionId)?.events ?? [];
    // Sequence numbers are 1-based and gapless: event n sits at index n - 1.
    const start = Math.max(0, options.after ?? 0);
    return events.slice(start, start + (options.limit ?? 1000)).map(copy);
  }

  subscribe(
    sessionId: string,
    listener: (events: StoredEvent[]) => void | Promise<void>,
    options: SubscribeOptions = {},
  ): EventPump {
    const read = (after: number, limit: number) => this.read(sessionId, { after, limit });
    const pump = this.#subscribers.add(sessionId, read, listener, options);
    pump.wake();
    return pump;
  }

  closeAll(): void {
    this.#subscribers.closeAll();
  }
}
