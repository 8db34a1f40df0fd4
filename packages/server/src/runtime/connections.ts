import type { Logger } from "../log.js";
import { Connection, type ConnectionOptions } from "./connection.js";

/** All live connections of the server, with idle expiry. */
export class ConnectionRegistry {
  private readonly connections = new Map<string, Connection>();
  /**
   * Every connection whose agent may still run: registered or not (initialize in flight), and
   * closed ones whose agent is still stopping. Shutdown waits for all of them, so the server
   * never exits leaving an agent behind.
   */
  private readonly live = new Set<Connection>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly idleMs: number,
    private readonly logger: Logger,
  ) {
    this.sweeper = setInterval(() => this.sweep(), Math.max(250, Math.min(idleMs / 4, 30_000)));
    this.sweeper.unref();
  }

  /** Creates a connection that becomes visible to `get` only once `register` is called. */
  create(options: Omit<ConnectionOptions, "onClosed">): Connection {
    const conn = new Connection({ ...options, onClosed: (c) => this.connections.delete(c.id) });
    this.live.add(conn);
    void conn.agentGone.then(() => this.live.delete(conn));
    return conn;
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

  all(): Connection[] {
    return [...this.connections.values()];
  }

  /** Server shutdown: closes every connection and waits until every agent process is gone. */
  async shutdown(): Promise<void> {
    clearInterval(this.sweeper);
    const all = new Set([...this.connections.values(), ...this.live]);
    await Promise.all([...all].map((conn) => conn.shutdown()));
  }

  private sweep(): void {
    const now = Date.now();
    for (const conn of this.connections.values()) {
      if (conn.state === "open" && !conn.hasReader && now - conn.lastActivity > this.idleMs) {
        this.logger.info("closing idle connection", { idleMs: this.idleMs });
        void conn.close("idle");
      }
    }
  }
}
