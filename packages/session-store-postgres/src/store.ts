import type { SessionStore } from "@sandbox-agent/session-store";
import pg from "pg";
import { PostgresEvents } from "./events.js";
import { Listener } from "./listener.js";
import { migrateSchema } from "./migrations.js";
import { PostgresSandboxes } from "./sandboxes.js";
import { PostgresSessions } from "./sessions.js";
import { names } from "./sql.js";

export interface PostgresSessionStoreOptions {
  /** `postgresql://user:password@host:port/database`; default `$DATABASE_URL`. Never logged. */
  connectionString?: string;
  /** Use this pool instead of opening one (the store does not end it). */
  pool?: pg.Pool;
  /** Schema holding the tables (created when missing); default `sandbox_agent`. */
  schema?: string;
  /** Create or upgrade the schema when opening (default true); false when a deploy step runs `migrate`. */
  migrate?: boolean;
  /** Connections of the pool the store opens (default 10), plus one for LISTEN once something subscribes. */
  maxConnections?: number;
  /**
   * `application_name` of the store's connections (default `sandbox-agent`; the LISTEN connection adds
   * ` listener`), to tell replicas apart in `pg_stat_activity`.
   */
  applicationName?: string;
}

export interface PostgresSessionStore extends SessionStore {
  /** The pool the store queries with (e.g. to run your own queries in the same database). */
  readonly pool: pg.Pool;
}

const DEFAULT_SCHEMA = "sandbox_agent";
const DEFAULT_APPLICATION_NAME = "sandbox-agent";

function openPool(options: PostgresSessionStoreOptions): { pool: pg.Pool; owned: boolean } {
  if (options.pool) return { pool: options.pool, owned: false };
  const connectionString = options.connectionString ?? process.env.DATABASE_URL;
  if (!connectionString) {
    throw new TypeError(
      "postgresSessionStore: no database: pass { connectionString } or set DATABASE_URL " +
        "(e.g. postgresql://user:password@127.0.0.1:5432/app)",
    );
  }
  const pool = new pg.Pool({
    connectionString,
    max: options.maxConnections ?? 10,
    application_name: options.applicationName ?? DEFAULT_APPLICATION_NAME,
    keepAlive: true,
  });
  // An idle connection that dies (server restart) is dropped by the pool; the next query opens another.
  pool.on("error", () => undefined);
  return { pool, owned: true };
}

/**
 * A session store in PostgreSQL, shared by every replica that opens it on the same database and schema.
 * Creates or upgrades the schema first (see `migrate`). Live event delivery and change notifications use
 * LISTEN/NOTIFY on one extra connection per store, opened on first `subscribe` or `watch`.
 */
export async function postgresSessionStore(
  options: PostgresSessionStoreOptions = {},
): Promise<PostgresSessionStore> {
  const n = names(options.schema ?? DEFAULT_SCHEMA);
  const { pool, owned } = openPool(options);
  try {
    if (options.migrate !== false) await withClient(pool, (client) => migrateSchema(client, n.schema));
  } catch (error) {
    if (owned) await pool.end().catch(() => undefined);
    throw error;
  }
  // The listener's callbacks run only once it is started, by the first subscribe or watch below.
  const config = (pool as pg.Pool & { options: pg.ClientConfig }).options;
  const listener = new Listener({
    config: {
      ...config,
      application_name: `${config.application_name ?? DEFAULT_APPLICATION_NAME} listener`,
    },
    channels: [n.eventsChannel, n.sandboxesChannel],
    onNotification: (channel, payload) => {
      if (channel === n.eventsChannel) events.notified(payload);
      else {
        const [provider, key] = JSON.parse(payload) as [string, string];
        sandboxes.notify({ provider, key });
      }
    },
    onListening: () => {
      events.listening();
      sandboxes.notify(undefined);
    },
    onError: (error) => events.failed(error),
  });
  const sandboxes = new PostgresSandboxes(pool, n, () => listener.start());
  const events = new PostgresEvents(pool, n, listener);
  let closed: Promise<void> | undefined;
  return {
    pool,
    sandboxes,
    sessions: new PostgresSessions(pool, n),
    events,
    close: () =>
      (closed ??= (async () => {
        events.closeAll();
        await listener.close();
        if (owned) await pool.end();
      })()),
  };
}

/** Creates or upgrades the schema without opening a store (e.g. from a deploy step). */
export async function migrate(
  options: Omit<PostgresSessionStoreOptions, "migrate" | "maxConnections"> = {},
): Promise<{ from: number; to: number }> {
  const n = names(options.schema ?? DEFAULT_SCHEMA);
  const { pool, owned } = openPool({ ...options, maxConnections: 1 });
  try {
    return await withClient(pool, (client) => migrateSchema(client, n.schema));
  } finally {
    if (owned) await pool.end();
  }
}

async function withClient<T>(pool: pg.Pool, body: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    return await body(client);
  } finally {
    client.release();
  }
}
