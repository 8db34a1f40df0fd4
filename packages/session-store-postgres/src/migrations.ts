import type pg from "pg";
import { LOCK_CLASS } from "./sql.js";

/**
 * The schema, as numbered steps. A step is never edited once released: a change is a new step.
 * `{s}` is the (quoted) schema name.
 */
const MIGRATIONS: ReadonlyArray<{ version: number; name: string; sql: string }> = [
  {
    version: 1,
    name: "sandboxes, capacity queue, sessions, session events",
    sql: `
      CREATE TABLE {s}.sandboxes (
        key text PRIMARY KEY,
        provider text NOT NULL,
        provider_id text,
        endpoint text,
        status text NOT NULL CHECK (status IN ('pending', 'starting', 'running', 'stopping', 'stopped')),
        lease_owner text,
        lease_expires_at timestamptz,
        metadata jsonb NOT NULL DEFAULT '{}',
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        last_active_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX sandboxes_provider_status ON {s}.sandboxes (provider, status);
      CREATE TABLE {s}.capacity_queue (
        ticket bigserial PRIMARY KEY,
        provider text NOT NULL,
        owner text NOT NULL,
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX capacity_queue_provider ON {s}.capacity_queue (provider, ticket);
      CREATE TABLE {s}.sessions (
        id text PRIMARY KEY,
        sandbox_key text NOT NULL,
        agent text NOT NULL,
        connection_id text,
        agent_session_id text,
        metadata jsonb NOT NULL DEFAULT '{}',
        last_event_id text,
        last_seq bigint NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX sessions_sandbox_key ON {s}.sessions (sandbox_key, created_at);
      -- No foreign key to sessions: checking one per row would cost a lookup per mirrored event;
      -- sessions.delete removes a session's events in the same statement.
      CREATE TABLE {s}.session_events (
        session_id text NOT NULL,
        seq bigint NOT NULL,
        event_id text,
        data json NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (session_id, seq)
      );
    `,
  },
];

/** The schema version this driver writes and reads. */
export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

/**
 * Creates or upgrades the schema, in one transaction under an advisory lock: replicas starting at once
 * wait for the first, then find nothing left to do. A database already past this driver's version is
 * refused (an older replica must not write a newer schema).
 */
export async function migrateSchema(
  client: pg.ClientBase,
  schema: string,
): Promise<{ from: number; to: number }> {
  const s = `"${schema}"`;
  await client.query("BEGIN");
  try {
    await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [LOCK_CLASS, `${schema} migrate`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${s}.schema_migrations (
         version integer PRIMARY KEY,
         name text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
    const { rows } = await client.query<{ version: number }>(
      `SELECT coalesce(max(version), 0)::int AS version FROM ${s}.schema_migrations`,
    );
    const from = rows[0]!.version;
    if (from > SCHEMA_VERSION) {
      throw new Error(
        `schema "${schema}" is at version ${from}, newer than this driver's ${SCHEMA_VERSION}: ` +
          `upgrade @sandbox-agent/session-store-postgres on this replica`,
      );
    }
    for (const step of MIGRATIONS.filter((m) => m.version > from)) {
      await client.query(step.sql.replaceAll("{s}", s));
      await client.query(`INSERT INTO ${s}.schema_migrations (version, name) VALUES ($1, $2)`, [
        step.version,
        step.name,
      ]);
    }
    await client.query("COMMIT");
    return { from, to: Math.max(from, SCHEMA_VERSION) };
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  }
}
