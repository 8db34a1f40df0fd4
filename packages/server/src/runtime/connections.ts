import type { Logger } from "../log.js";
import { Connection, type ConnectionOptions } from "./connection.js";

/** All live connections of the server, with idle expiry. */
export class ConnectionRegistry {
  private readonly connections = new Map<string, Connection>();
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
    return new Connection({ ...options, onClosed: (conn) => this.connections.delete(conn.id) });
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

  async closeAll(reason: string): Promise<void> {
    clearInterval(this.sweeper);
    await Promise.all(this.all().map((conn) => conn.close(reason)));
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
