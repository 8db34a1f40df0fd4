import {
  memorySessionStore,
  type AdmitResult,
  type SandboxPatch,
  type SandboxRecord,
  type SessionStore,
} from "@sandbox-agent/session-store";
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { PersistentSandboxProvider, ProviderCreateRequest, ProviderInstance } from "./provider.js";

export interface FleetIdlePolicy {
  /** A running sandbox with no activity (`touch`, start) for this long is reaped. */
  ttlMs: number;
  /** `stop` (default): keep it for resume. `destroy`: remove it and its record. */
  action?: "stop" | "destroy";
  /** How often this replica looks for idle sandboxes (default: a quarter of `ttlMs`, at most a minute). */
  intervalMs?: number;
}

export interface FleetOptions {
  provider: PersistentSandboxProvider;
  /** Shared by every replica (e.g. `postgresSessionStore()`); default: an in-memory store of this process. */
  store?: SessionStore;
  /** At most this many live (starting, running or stopping) sandboxes of this provider, across replicas. */
  maxLive?: number;
  /** How long `getOrCreate` waits, in line for a slot or for another replica busy with the key (default 60 s). */
  waitTimeoutMs?: number;
  /** A replica that dies mid-operation blocks its sandbox this long at most (default 30 s; renewed meanwhile). */
  leaseTtlMs?: number;
  /** Reap idle sandboxes on a timer (also callable as `reap()`). */
  idle?: FleetIdlePolicy;
  /** Lease owner id of this replica (default: host, pid and a random suffix). */
  owner?: string;
  /** Errors of background work (the reaper); default: `process.emitWarning`. */
  onError?: (error: Error) => void;
}

export interface GetOrCreateOptions {
  /** Declared env and secrets for the instance (`ProviderCreateRequest.env`); never stored. */
  env?: Record<string, string>;
  /** Stored on the sandbox record when this call creates it. */
  metadata?: Record<string, unknown>;
  signal?: AbortSignal;
}

export interface FleetSandbox {
  readonly record: SandboxRecord;
  readonly instance: ProviderInstance;
  /** `created`: new (bootstrap its workspace); `resumed`: it existed (stopped or running), files intact. */
  readonly outcome: "created" | "resumed";
}

export interface ReapResult {
  /** Keys this replica stopped or destroyed for idleness. */
  reaped: string[];
  /** Keys whose operation a dead replica left unfinished, put back in a certain state by this one. */
  recovered: string[];
}

export interface Fleet {
  readonly store: SessionStore;
  readonly owner: string;
  /** The provider whose sandboxes this fleet operates. */
  readonly provider: PersistentSandboxProvider;
  /**
   * The sandbox of `key`, from any replica: reattached when it runs, resumed when stopped, created when
   * new (waiting in line when `maxLive` sandboxes are live). Of replicas asking at once, one creates it
   * and the others reattach to it.
   */
  getOrCreate(key: string, options?: GetOrCreateOptions): Promise<FleetSandbox>;
  /** Records activity: keeps the sandbox from being reaped for another idle TTL. */
  touch(key: string): Promise<void>;
  /** Stops the sandbox now, keeping it for resume; false when there is none. */
  stop(key: string): Promise<boolean>;
  /** Removes the sandbox and its record; false when there is none. */
  destroy(key: string): Promise<boolean>;
  /** One reaper pass: idle sandboxes, then operations abandoned by dead replicas. */
  reap(): Promise<ReapResult>;
  /** Stops the reaper timer; closes the store only when the fleet made it. Sandboxes keep running. */
  close(): Promise<void>;
}

/** `getOrCreate` waited longer than `waitTimeoutMs` for a capacity slot. */
export class CapacityTimeoutError extends Error {
  override readonly name = "CapacityTimeoutError";
  constructor(
    readonly provider: string,
    readonly maxLive: number,
    readonly waitedMs: number,
    readonly state: AdmitResult,
  ) {
    super(
      `no free slot for a "${provider}" sandbox after ${waitedMs} ms: ${state.live} of ${maxLive} are live and ` +
        `${state.ahead} request(s) wait ahead of this one (all replicas). Stop idle sandboxes ` +
        `(fleet.stop, or an idle policy), raise maxLive, or retry later.`,
    );
  }
}

/** `getOrCreate`, `stop` or `destroy` waited longer than `waitTimeoutMs` for another replica busy with the key. */
export class SandboxBusyError extends Error {
  override readonly name = "SandboxBusyError";
  constructor(
    readonly key: string,
    readonly holder: string | undefined,
    readonly waitedMs: number,
  ) {
    super(
      `sandbox "${key}" stayed busy for ${waitedMs} ms (held by ${holder ?? "another replica"}, e.g. still ` +
        `creating it); retry later. A replica that died frees it when its lease expires.`,
    );
  }
}

const DEFAULTS = { waitTimeoutMs: 60_000, leaseTtlMs: 30_000 };

/** One call's hold on a key: its own lease owner id, and when it began waiting. */
interface Operation {
  key: string;
  owner: string;
  started: number;
}
const POLL_MIN_MS = 50;
const POLL_MAX_MS = 1000;

/**
 * Operates many sandboxes of one provider for every replica of an application that shares `store`:
 * getOrCreate by key, a capacity limit with a FIFO queue, an idle reaper. Every change of a sandbox
 * happens under its lease in the store, so no two replicas create, resume, stop or reap the same
 * sandbox at once; a replica that dies mid-operation leaves a lease that expires, and the next one to
 * touch the key (or the reaper) finishes the job.
 */
export function createFleet(options: FleetOptions): Fleet {
  return new FleetImpl(options);
}

class FleetImpl implements Fleet {
  readonly store: SessionStore;
  readonly owner: string;
  readonly provider: PersistentSandboxProvider;
  readonly #ownsStore: boolean;
  readonly #maxLive: number;
  readonly #waitMs: number;
  readonly #ttl: number;
  readonly #idle: FleetIdlePolicy | undefined;
  readonly #onError: (error: Error) => void;
  readonly #waiters = new Set<() => void>();
  readonly #unwatch: () => void;
  readonly #timer: NodeJS.Timeout | undefined;
  #operations = 0;

  constructor(options: FleetOptions) {
    this.provider = options.provider;
    this.#ownsStore = options.store === undefined;
    this.store = options.store ?? memorySessionStore();
    this.owner = options.owner ?? `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
    this.#maxLive = options.maxLive ?? Infinity;
    this.#waitMs = options.waitTimeoutMs ?? DEFAULTS.waitTimeoutMs;
    this.#ttl = options.leaseTtlMs ?? DEFAULTS.leaseTtlMs;
    this.#idle = options.idle;
    this.#onError = options.onError ?? ((error) => process.emitWarning(error));
    if (!(this.#maxLive >= 1))
      throw new TypeError(`createFleet: maxLive must be at least 1, got ${options.maxLive}`);
    // Any change of a record may be what a waiter waits for: wake them all to re-check.
    this.#unwatch = this.store.sandboxes.watch(() => this.#wakeWaiters());
    if (this.#idle) {
      const every = this.#idle.intervalMs ?? Math.min(this.#idle.ttlMs / 4, 60_000);
      this.#timer = setInterval(() => void this.reap().catch(this.#onError), every);
      this.#timer.unref();
    }
  }

  async getOrCreate(key: string, options: GetOrCreateOptions = {}): Promise<FleetSandbox> {
    const op = this.#operation(key);
    const request: ProviderCreateRequest = { id: key, env: options.env ?? {} };
    const record = (await this.#lease(op, options.signal))!;
    return this.#holding(op, async () => {
      try {
        return await this.#bringUp(op, record, request, options);
      } catch (error) {
        await this.#giveUp(op);
        throw error;
      }
    });
  }

  async touch(key: string): Promise<void> {
    await this.store.sandboxes.touch(key);
  }

  stop(key: string): Promise<boolean> {
    return this.#takeDown(this.#operation(key), "stop");
  }

  destroy(key: string): Promise<boolean> {
    return this.#takeDown(this.#operation(key), "destroy");
  }

  async reap(): Promise<ReapResult> {
    const result: ReapResult = { reaped: [], recovered: [] };
    if (this.#idle) {
      const { ttlMs, action = "stop" } = this.#idle;
      const idle = await this.store.sandboxes.list({
        provider: this.provider.name,
        status: ["running"],
        idleForMs: ttlMs,
      });
      for (const { key } of idle) {
        const op = this.#operation(key);
        // Re-checked atomically with the lease: another replica may have reaped or used it meanwhile.
        const leased = await this.store.sandboxes.acquire(key, {
          owner: op.owner,
          ttlMs: this.#ttl,
          status: ["running"],
          idleForMs: ttlMs,
        });
        if (leased && (await this.#attempt(op, () => this.#shutDown(op, action)))) result.reaped.push(key);
      }
    }
    const abandoned = await this.store.sandboxes.list({
      provider: this.provider.name,
      status: ["pending", "starting", "stopping"],
      leaseExpired: true,
    });
    for (const { key } of abandoned) {
      const op = this.#operation(key);
      const leased = await this.store.sandboxes.acquire(key, {
        owner: op.owner,
        ttlMs: this.#ttl,
        status: ["pending", "starting", "stopping"],
      });
      if (leased && (await this.#attempt(op, () => this.#recover(op, leased)))) result.recovered.push(key);
    }
    return result;
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    this.#unwatch();
    this.#wakeWaiters();
    if (this.#ownsStore) await this.store.close();
  }

  /**
   * Each operation holds the lease under its own owner id (this replica's id and a counter): two calls
   * of this process for one key exclude each other just as two replicas do.
   */
  #operation(key: string): Operation {
    return { key, owner: `${this.owner}/${++this.#operations}`, started: Date.now() };
  }

  // ─── Under the lease ─────────────────────────────────────────────────────────────────────────

  async #bringUp(
    op: Operation,
    record: SandboxRecord,
    request: ProviderCreateRequest,
    options: GetOrCreateOptions,
  ): Promise<FleetSandbox> {
    let status = record.status;
    if (status === "starting" || status === "stopping")
      status = (await this.#recover(op, record, false)).status;
    if (status === "running") {
      const instance = await this.provider.resume(request);
      if (instance) return this.#up(op, instance, "resumed");
      // It vanished behind our back; its slot is still counted as ours, so recreate it in place.
      await this.store.sandboxes.update(op.key, op.owner, { status: "starting" });
      return this.#up(op, await this.provider.create(request), "created", options.metadata);
    }
    await this.#admit(op, options.signal);
    // Even for a new record: a sandbox left by a store that forgot it (an in-memory store before a
    // restart) is adopted rather than refused.
    const resumed = await this.provider.resume(request);
    if (resumed) return this.#up(op, resumed, "resumed");
    return this.#up(op, await this.provider.create(request), "created", options.metadata);
  }

  async #up(
    op: Operation,
    instance: ProviderInstance,
    outcome: FleetSandbox["outcome"],
    metadata?: Record<string, unknown>,
  ): Promise<FleetSandbox> {
    const patch: SandboxPatch = {
      status: "running",
      providerId: instance.providerId ?? null,
      endpoint: instance.endpoint ?? null,
      touch: true,
      ...(metadata !== undefined ? { metadata } : {}),
    };
    try {
      const record = await this.store.sandboxes.release(op.key, op.owner, patch);
      return { record, instance, outcome };
    } catch (error) {
      await instance.dispose().catch(() => undefined);
      throw error;
    }
  }

  /** After a failed bring-up: leave a record that says what is certain, and free the lease. */
  async #giveUp(op: Operation): Promise<void> {
    const current = await this.store.sandboxes.get(op.key).catch(() => undefined);
    if (current?.lease?.owner !== op.owner) return;
    if (current.status === "pending") {
      await this.store.sandboxes.remove(op.key, op.owner).catch(() => undefined);
      return;
    }
    // Half-created or half-resumed: stopped is certain after a stop, and frees the slot.
    if (current.status === "starting") await this.provider.stop(op.key).catch(() => undefined);
    const patch: SandboxPatch = current.status === "starting" ? { status: "stopped" } : {};
    await this.store.sandboxes.release(op.key, op.owner, patch).catch(() => undefined);
  }

  async #takeDown(op: Operation, action: "stop" | "destroy"): Promise<boolean> {
    const record = await this.#lease(op, undefined, false);
    if (record === undefined) return false;
    return this.#holding(op, async () => {
      if (action === "stop" && (record.status === "stopped" || record.status === "pending")) {
        await this.store.sandboxes.release(op.key, op.owner);
        return record.status === "stopped";
      }
      return this.#shutDown(op, action);
    });
  }

  /** Stops or destroys a leased sandbox; on failure it stays `running` for a later attempt. */
  async #shutDown(op: Operation, action: "stop" | "destroy"): Promise<boolean> {
    await this.store.sandboxes.update(op.key, op.owner, { status: "stopping" });
    try {
      if (action === "destroy") {
        await this.provider.destroy(op.key);
        await this.store.sandboxes.remove(op.key, op.owner);
      } else {
        await this.provider.stop(op.key);
        await this.store.sandboxes.release(op.key, op.owner, { status: "stopped" });
      }
      return true;
    } catch (error) {
      await this.store.sandboxes.release(op.key, op.owner, { status: "running" }).catch(() => undefined);
      throw error;
    }
  }

  /**
   * A dead replica's unfinished operation: the sandbox may or may not exist, may or may not run. After
   * `stop` it is certainly not running, so `stopped` is the truth (and frees its slot); `resume` then
   * finds it, or creates it when it never existed. A `pending` record never reached the provider.
   */
  async #recover(op: Operation, record: SandboxRecord, release = true): Promise<SandboxRecord> {
    if (record.status === "pending") {
      if (release) await this.store.sandboxes.remove(op.key, op.owner);
      return record;
    }
    await this.provider.stop(op.key);
    return release
      ? this.store.sandboxes.release(op.key, op.owner, { status: "stopped" })
      : this.store.sandboxes.update(op.key, op.owner, { status: "stopped" });
  }

  // ─── Waiting ─────────────────────────────────────────────────────────────────────────────────

  /** Takes the key's lease, waiting while another operation holds it; `create: false` leases existing records only. */
  async #lease(
    op: Operation,
    signal: AbortSignal | undefined,
    create = true,
  ): Promise<SandboxRecord | undefined> {
    const provider = this.provider.name;
    for (let attempt = 0; ; attempt++) {
      const record = await this.store.sandboxes.acquire(op.key, {
        owner: op.owner,
        ttlMs: this.#ttl,
        ...(create ? { provider } : {}),
      });
      if (record) {
        if (record.provider === provider) return record;
        await this.store.sandboxes.release(op.key, op.owner);
        throw new TypeError(
          `sandbox "${op.key}" belongs to provider "${record.provider}", not "${provider}"`,
        );
      }
      const current = await this.store.sandboxes.get(op.key);
      if (current === undefined && !create) return undefined;
      const waited = Date.now() - op.started;
      if (waited > this.#waitMs) throw new SandboxBusyError(op.key, current?.lease?.owner, waited);
      await this.#wait(attempt, signal);
    }
  }

  /** Waits in the provider's line until the leased key is admitted: it is then `starting`, holding a slot. */
  async #admit(op: Operation, signal: AbortSignal | undefined): Promise<void> {
    const provider = this.provider.name;
    if (this.#maxLive === Infinity) {
      await this.store.sandboxes.update(op.key, op.owner, { status: "starting" });
      return;
    }
    const ticket = await this.store.sandboxes.enqueue(provider, op.owner, this.#ttl);
    try {
      for (let attempt = 0; ; attempt++) {
        const admission = {
          key: op.key,
          owner: op.owner,
          ticket,
          provider,
          limit: this.#maxLive,
          ttlMs: this.#ttl,
        };
        const state = await this.store.sandboxes.admit(admission);
        if (state.admitted) return;
        const waited = Date.now() - op.started;
        if (waited > this.#waitMs) throw new CapacityTimeoutError(provider, this.#maxLive, waited, state);
        await this.#wait(attempt, signal);
      }
    } catch (error) {
      await this.store.sandboxes.dequeue(ticket).catch(() => undefined);
      throw error;
    }
  }

  /** Until a change is reported (any replica) or a poll interval passes (changes that report nothing: expiry). */
  #wait(attempt: number, signal: AbortSignal | undefined): Promise<void> {
    signal?.throwIfAborted();
    const pollMs = Math.min(POLL_MIN_MS * 2 ** attempt, POLL_MAX_MS);
    return new Promise<void>((resolve, reject) => {
      const cleanup = (): void => {
        clearTimeout(timer);
        this.#waiters.delete(done);
        signal?.removeEventListener("abort", aborted);
      };
      const done = (): void => {
        cleanup();
        resolve();
      };
      const aborted = (): void => {
        cleanup();
        reject(signal!.reason);
      };
      const timer = setTimeout(done, pollMs);
      this.#waiters.add(done);
      signal?.addEventListener("abort", aborted, { once: true });
    });
  }

  #wakeWaiters(): void {
    for (const wake of [...this.#waiters]) wake();
  }

  /** A reaper step: its failure is reported and does not stop the pass. */
  async #attempt(op: Operation, body: () => Promise<unknown>): Promise<boolean> {
    try {
      await this.#holding(op, body);
      return true;
    } catch (error) {
      this.#onError(
        new Error(`fleet reaper: sandbox "${op.key}": ${(error as Error).message}`, { cause: error }),
      );
      return false;
    }
  }

  /** Runs `body` while renewing the key's lease every third of its TTL. */
  async #holding<T>(op: Operation, body: () => Promise<T>): Promise<T> {
    const renew = setInterval(
      () => void this.store.sandboxes.renew(op.key, op.owner, this.#ttl).catch(() => undefined),
      this.#ttl / 3,
    );
    try {
      return await body();
    } finally {
      clearInterval(renew);
    }
  }
}
