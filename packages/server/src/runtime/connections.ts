import type { Logger } from "../log.js";
import { Connection, type ConnectionOptions } from "./connection.js";
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

  constructor(private readonly options: RegistryOptions) {
    const { idleMs } = options;
    this.sweeper = setInterval(() => this.sweep(), Math.max(250, Math.min(idleMs / 4, 30_000)));
    this.sweeper.unref();
  }

  /**
   * Creates a connection (spawning its agent) that becomes visible to `get` only once `register`
   * is called. Throws `ConnectionRefused` at the cap and once shutdown has begun, so no agent can
   * start after the shutdown took its list of agents to stop.
   */
  create(options: Omit<ConnectionOptions, "onClosed" | "guard">): Connection {
    if (this.shuttingDown) throw new ConnectionRefused("shutting_down", "The server is shutting down.");
    this.checkCapacity();
    const conn = new Connection({
      ...options,
      guard: this.options.guard,
      onClosed: (c) => this.connections.delete(c.id),
    });
    this.live.add(conn);
    void conn.agentGone.then(() => this.live.delete(conn));
    return conn;
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
  }

  get(id: string): Connection | undefined {
    return this.connections.get(id);
  }

  get size(): number {
    return this.connections.size;
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

  /** Server shutdown: refuses new connections, closes every one and waits until every agent process is gone. */
  async shutdown(): Promise<void> {
    this.shuttingDown = true;
    clearInterval(this.sweeper);
    const all = new Set([...this.connections.values(), ...this.live]);
    await Promise.all([...all].map((conn) => conn.shutdown()));
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
