import { nodeCrypto } from "../lazy-builtins.js";
import { shortId, type Logger } from "../log.js";
import type { EventStore, StateTable } from "../store/event-store.js";
import { Connection, type ConnectionOptions } from "./connection.js";
import type { AgentLaunch, ConnectionRecord } from "./connection-record.js";
import type { ConnectionExtension } from "./extension.js";
import type { ConnectionObserver } from "./observer.js";
import type { ConnectionSnapshot } from "./connection-snapshot.js";
import type { OrphanGuard } from "./orphan-guard.js";

/** Why the registry refused to start a connection; the HTTP layer answers 503 with it. */
export class ConnectionRefused extends Error {
  constructor(
    readonly kind: "full" | "shutting_down",
    message: string,
    readonly limit?: number,
  ) {
    super(message);
  }
}

export interface RegistryOptions {
  idleMs: number;
  /** Agents that may be alive at once (starting, running or stopping). */
  maxConnections: number;
  logger: Logger;
  guard?: OrphanGuard;
  /** Where connections keep their events, and (durable) the index of connections. */
  store: EventStore;
  /** Told about connection lifecycles and events (logs, metrics). */
  observer?: ConnectionObserver;
}

/** What `recover` needs to bring back the connections of an earlier run. */
export interface RecoverOptions extends Omit<
  ConnectionOptions,
  "onClosed" | "guard" | "id" | "epoch" | "log" | "launch" | "recovered" | "extensions"
> {
  /** The extensions, loaded only when there is a connection to recover. */
  extensions(): Promise<ConnectionExtension[]>;
  /** How the agent of a recovered connection is started again (from its record's initialize request). */
  relaunch(record: ConnectionRecord): Promise<AgentLaunch>;
}

/** All live connections of the server, with idle expiry. */
export class ConnectionRegistry {
  private readonly connections = new Map<string, Connection>();
  /**
   * Every connection whose agent may still run: registered or not (initialize in flight), and
   * closed ones whose agent is still stopping. Shutdown waits for all of them, so the server
   * never exits leaving an agent behind; the connection cap counts them, since each holds
   * descriptors until its agent is gone.
   */
  private readonly live = new Set<Connection>();
  private readonly sweeper: NodeJS.Timeout;
  private shuttingDown = false;
  /** The index of connections: on disk with a durable store, so a restart finds them again. */
  private readonly records: StateTable<ConnectionRecord>;

  constructor(private readonly options: RegistryOptions) {
    this.records = options.store.table<ConnectionRecord>("connections");
    const { idleMs } = options;
    this.sweeper = setInterval(() => this.sweep(), Math.max(250, Math.min(idleMs / 4, 30_000)));
    this.sweeper.unref();
  }

  /**
   * Creates a connection (spawning its agent) that becomes visible to `get` only once `register`
   * is called. Throws `ConnectionRefused` at the cap and once shutdown has begun, so no agent can
   * start after the shutdown took its list of agents to stop.
   */
  create(
    options: Omit<
      ConnectionOptions,
      "onClosed" | "guard" | "observer" | "id" | "epoch" | "log" | "recovered"
    > & {
      /** The connection's id, when the transport had to name it before it started; default: a new UUID. */
      id?: string | undefined;
    },
  ): Connection {
    if (this.shuttingDown) throw new ConnectionRefused("shutting_down", "The server is shutting down.");
    this.checkCapacity();
    const id = options.id ?? nodeCrypto().randomUUID();
    const { replayEvents, replayBytes } = options.limits;
    const log = this.options.store.createLog(id, { maxEvents: replayEvents, maxBytes: replayBytes });
    const conn = new Connection({
      ...options,
      ...this.hooks(),
      id,
      epoch: nodeCrypto().randomBytes(4).toString("hex"),
      log,
    });
    this.track(conn);
    return conn;
  }

  /** Whether an earlier run left connections in the store for `recover` to bring back. */
  get hasRecords(): boolean {
    return this.records.size > 0;
  }

  /**
   * Brings back the connections an earlier run left in a durable store (same ids, same event
   * logs; agents start on first use). Returns how many; a connection whose log is gone is
   * forgotten, a repaired log (a torn tail cut off) is reported.
   */
  async recover(options: RecoverOptions): Promise<number> {
    if (this.records.size === 0) return 0;
    const { store, logger } = this.options;
    const { replayEvents, replayBytes } = options.limits;
    const { relaunch, ...rest } = options;
    const connectionOptions = { ...rest, extensions: await options.extensions() };
    let count = 0;
    for (const [id, record] of [...this.records.entries()]) {
      const opened = store.openLog(id, { maxEvents: replayEvents, maxBytes: replayBytes });
      if (!opened) {
        logger.warn("forgetting a connection whose event log is missing", { connection: shortId(id) });
        for (const ext of connectionOptions.extensions) ext.connectionClosed?.(id);
        this.records.delete(id);
        continue;
      }
      if (opened.repair)
        logger.warn("repaired the event log of a connection", { connection: shortId(id), ...opened.repair });
      const conn = new Connection({
        ...connectionOptions,
        ...this.hooks(),
        id,
        epoch: record.epoch,
        log: opened.log,
        recovered: { record, relaunch: () => relaunch(record) },
      });
      this.connections.set(id, conn);
      this.records.set(id, conn.record());
      count++;
    }
    return count;
  }

  private hooks(): Pick<ConnectionOptions, "guard" | "observer" | "onClosed" | "persist" | "agentStarted"> {
    return {
      guard: this.options.guard,
      observer: this.options.observer,
      onClosed: (c) => {
        this.connections.delete(c.id);
        this.records.delete(c.id);
      },
      // In memory no record outlives the process: none is written on every request.
      persist: this.options.store.durable
        ? (c) => {
            if (this.connections.get(c.id) !== c) return undefined;
            this.records.set(c.id, c.record());
            return this.records.failure;
          }
        : undefined,
      agentStarted: (c) => this.track(c),
    };
  }

  /** Counts the connection's agent until it is gone. */
  private track(conn: Connection): void {
    this.live.add(conn);
    void conn.agentGone.then((exit) => {
      this.live.delete(conn);
      this.options.observer?.agentGone(conn, exit);
    });
  }

  /** Throws `ConnectionRefused` if a new connection would pass the cap (checked again by `create`). */
  checkCapacity(): void {
    if (this.shuttingDown) throw new ConnectionRefused("shutting_down", "The server is shutting down.");
    const { maxConnections } = this.options;
    if (this.live.size >= maxConnections) {
      throw new ConnectionRefused(
        "full",
        `The server runs its limit of ${maxConnections} agents (limits.maxConnections); close a connection (DELETE) or retry later.`,
        maxConnections,
      );
    }
  }

  register(conn: Connection): void {
    this.connections.set(conn.id, conn);
    this.records.set(conn.id, conn.record());
    this.options.observer?.opened(conn);
  }

  get(id: string): Connection | undefined {
    return this.connections.get(id);
  }

  get size(): number {
    return this.connections.size;
  }

  /** Agent processes alive: starting, running or stopping. */
  get agentsAlive(): number {
    return this.live.size;
  }

  /** Whether shutdown has begun. */
  get closing(): boolean {
    return this.shuttingDown;
  }

  /** Read-only copies of every registered connection, oldest first (for `GET /v2/connections`). */
  snapshots(): ConnectionSnapshot[] {
    return [...this.connections.values()].map((conn) => conn.snapshot());
  }

  /** A read-only copy of one connection, if registered. */
  snapshot(id: string): ConnectionSnapshot | undefined {
    return this.connections.get(id)?.snapshot();
  }

  all(): Connection[] {
    return [...this.connections.values()];
  }

  /**
   * Server shutdown: refuses new connections, closes every one (with a durable store, keeps every
   * registered one for the next run instead) and waits until every agent process is gone.
   */
  async shutdown(): Promise<void> {
    this.shuttingDown = true;
    clearInterval(this.sweeper);
    const durable = this.options.store.durable;
    const all = new Set([...this.connections.values(), ...this.live]);
    await Promise.all(
      [...all].map((conn) =>
        durable && this.connections.get(conn.id) === conn ? conn.suspend() : conn.shutdown(),
      ),
    );
  }

  /** A hurried shutdown: SIGKILL to every agent now. */
  hurry(): void {
    for (const conn of new Set([...this.connections.values(), ...this.live])) conn.hurry();
  }

  private sweep(): void {
    const now = Date.now();
    const { idleMs, logger } = this.options;
    for (const conn of this.connections.values()) {
      if (conn.state === "open" && !conn.hasReader && now - conn.lastActivity > idleMs) {
        logger.info("closing idle connection", { idleMs });
        conn.abandon("idle", { idleMs });
      }
    }
  }
}
