import {
  LIVE_STATUSES,
  LeaseLostError,
  checkId,
  type AcquireOptions,
  type AdmitOptions,
  type AdmitResult,
  type ListSandboxesOptions,
  type SandboxChange,
  type SandboxPatch,
  type SandboxRecord,
  type SandboxStore,
} from "@sandbox-agent/session-store";
import type pg from "pg";
import { LOCK_CLASS, later, patchAssignments, toSandbox, type Names, type SandboxRow } from "./sql.js";

/** The lease is held by `owner` and not expired: the condition every change under a lease checks. */
const HELD = "lease_owner = $2 AND lease_expires_at > now()";

export class PostgresSandboxes implements SandboxStore {
  readonly #watchers = new Set<(change: SandboxChange) => void>();

  constructor(
    private readonly pool: pg.Pool,
    private readonly n: Names,
    private readonly startListening: () => void,
  ) {}

  async get(key: string): Promise<SandboxRecord | undefined> {
    const { rows } = await this.pool.query<SandboxRow>(`SELECT * FROM ${this.n.sandboxes} WHERE key = $1`, [
      key,
    ]);
    return rows[0] && toSandbox(rows[0]);
  }

  async list(options: ListSandboxesOptions = {}): Promise<SandboxRecord[]> {
    const where: string[] = [];
    const values: unknown[] = [];
    const param = (value: unknown): string => `$${values.push(value)}`;
    if (options.provider !== undefined) where.push(`provider = ${param(options.provider)}`);
    if (options.status !== undefined) where.push(`status = ANY(${param(options.status)})`);
    if (options.idleForMs !== undefined) {
      where.push(`last_active_at <= now() - ${param(options.idleForMs)} * interval '1 millisecond'`);
    }
    if (options.leaseExpired === true) where.push("lease_owner IS NOT NULL AND lease_expires_at <= now()");
    if (options.leaseExpired === false)
      where.push("NOT (lease_owner IS NOT NULL AND lease_expires_at <= now())");
    const filter = where.length > 0 ? `WHERE ${where.join(" AND ")}` : "";
    const { rows } = await this.pool.query<SandboxRow>(
      `SELECT * FROM ${this.n.sandboxes} ${filter} ORDER BY created_at, key`,
      values,
    );
    return rows.map(toSandbox);
  }

  async acquire(key: string, options: AcquireOptions): Promise<SandboxRecord | undefined> {
    checkId("sandbox key", key);
    const values: unknown[] = [key, options.owner, options.ttlMs];
    const param = (value: unknown): string => `$${values.push(value)}`;
    const free = "(sb.lease_owner IS NULL OR sb.lease_expires_at <= now() OR sb.lease_owner = $2)";
    const conditions = [free];
    if (options.status !== undefined) conditions.push(`sb.status = ANY(${param(options.status)})`);
    if (options.idleForMs !== undefined) {
      conditions.push(`sb.last_active_at <= now() - ${param(options.idleForMs)} * interval '1 millisecond'`);
    }
    const take = `lease_owner = $2, lease_expires_at = ${later("$3")}, updated_at = now()`;
    // Insert-or-take in one statement: of concurrent callers, the first inserts or takes the lease and
    // the others re-check the condition against its committed row, which then fails.
    const sql =
      options.provider === undefined
        ? `UPDATE ${this.n.sandboxes} AS sb SET ${take} WHERE sb.key = $1 AND ${conditions.join(" AND ")} RETURNING *`
        : `INSERT INTO ${this.n.sandboxes} AS sb (key, provider, status, lease_owner, lease_expires_at)
           VALUES ($1, ${param(options.provider)}, 'pending', $2, ${later("$3")})
           ON CONFLICT (key) DO UPDATE SET ${take} WHERE ${conditions.join(" AND ")} RETURNING *`;
    const { rows } = await this.pool.query<SandboxRow>(sql, values);
    return rows[0] && toSandbox(rows[0]);
  }

  async renew(key: string, owner: string, ttlMs: number): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `UPDATE ${this.n.sandboxes} SET lease_expires_at = ${later("$3")} WHERE key = $1 AND ${HELD}`,
      [key, owner, ttlMs],
    );
    return rowCount === 1;
  }

  update(key: string, owner: string, patch: SandboxPatch): Promise<SandboxRecord> {
    return this.#change(key, owner, patch, "");
  }

  release(key: string, owner: string, patch: SandboxPatch = {}): Promise<SandboxRecord> {
    return this.#change(key, owner, patch, ", lease_owner = NULL, lease_expires_at = NULL");
  }

  async remove(key: string, owner: string): Promise<void> {
    const { rowCount } = await this.pool.query(
      `WITH gone AS (DELETE FROM ${this.n.sandboxes} WHERE key = $1 AND ${HELD} RETURNING provider, key)
       SELECT pg_notify($3, json_build_array(provider, key)::text) FROM gone`,
      [key, owner, this.n.sandboxesChannel],
    );
    if (rowCount !== 1) throw new LeaseLostError(key, owner);
  }

  async touch(key: string): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `UPDATE ${this.n.sandboxes} SET last_active_at = now() WHERE key = $1`,
      [key],
    );
    return rowCount === 1;
  }

  async enqueue(provider: string, owner: string, ttlMs: number): Promise<number> {
    const { rows } = await this.pool.query<{ ticket: string }>(
      `INSERT INTO ${this.n.queue} (provider, owner, expires_at) VALUES ($1, $2, ${later("$3")}) RETURNING ticket`,
      [provider, owner, ttlMs],
    );
    return Number(rows[0]!.ticket);
  }

  /**
   * One transaction under the provider's advisory lock, so admissions of all replicas are serialized:
   * the live count cannot change between counting and admitting (only admission makes a sandbox live).
   */
  async admit(options: AdmitOptions): Promise<AdmitResult> {
    const client = await this.pool.connect();
    try {
      await client.query("BEGIN");
      const result = await this.#admit(client, options);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  async #admit(client: pg.PoolClient, o: AdmitOptions): Promise<AdmitResult> {
    const { sandboxes, queue } = this.n;
    await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [
      LOCK_CLASS,
      `${this.n.schema} capacity ${o.provider}`,
    ]);
    await client.query(`DELETE FROM ${queue} WHERE provider = $1 AND expires_at <= now()`, [o.provider]);
    const lease = await client.query(
      `UPDATE ${sandboxes} SET lease_expires_at = ${later("$3")} WHERE key = $1 AND ${HELD}`,
      [o.key, o.owner, o.ttlMs],
    );
    if (lease.rowCount !== 1) throw new LeaseLostError(o.key, o.owner);
    const ticket = await client.query(`UPDATE ${queue} SET expires_at = ${later("$2")} WHERE ticket = $1`, [
      o.ticket,
      o.ttlMs,
    ]);
    if (ticket.rowCount !== 1) throw new Error(`capacity ticket ${o.ticket} expired: enqueue again`);
    const { rows } = await client.query<{ live: number; ahead: number }>(
      `SELECT (SELECT count(*)::int FROM ${sandboxes} WHERE provider = $1 AND status = ANY($2)) AS live,
              (SELECT count(*)::int FROM ${queue} WHERE provider = $1 AND ticket < $3) AS ahead`,
      [o.provider, LIVE_STATUSES, o.ticket],
    );
    const { live, ahead } = rows[0]!;
    if (ahead > 0 || live >= o.limit) return { admitted: false, live, ahead };
    await client.query(`DELETE FROM ${queue} WHERE ticket = $1`, [o.ticket]);
    await client.query(`UPDATE ${sandboxes} SET status = 'starting', updated_at = now() WHERE key = $1;`, [
      o.key,
    ]);
    await client.query("SELECT pg_notify($1, json_build_array($2::text, $3::text)::text)", [
      this.n.sandboxesChannel,
      o.provider,
      o.key,
    ]);
    return { admitted: true, live, ahead };
  }

  async dequeue(ticket: number): Promise<void> {
    await this.pool.query(
      `WITH gone AS (DELETE FROM ${this.n.queue} WHERE ticket = $1 RETURNING provider)
       SELECT pg_notify($2, json_build_array(provider, '')::text) FROM gone`,
      [ticket, this.n.sandboxesChannel],
    );
  }

  watch(listener: (change: SandboxChange) => void): () => void {
    this.startListening();
    this.#watchers.add(listener);
    return () => this.#watchers.delete(listener);
  }

  /** From the listener: a notification on the sandboxes channel, or `undefined` after a reconnect. */
  notify(change: SandboxChange | undefined): void {
    const wake = change ?? { key: "", provider: "" };
    for (const listener of this.#watchers) listener(wake);
  }

  async #change(key: string, owner: string, patch: SandboxPatch, extra: string): Promise<SandboxRecord> {
    const { sql, values } = patchAssignments(patch, 4);
    const { rows } = await this.pool.query<SandboxRow>(
      `WITH changed AS (
         UPDATE ${this.n.sandboxes} SET ${sql}${extra} WHERE key = $1 AND ${HELD} RETURNING *
       )
       SELECT changed.*, pg_notify($3, json_build_array(provider, key)::text) FROM changed`,
      [key, owner, this.n.sandboxesChannel, ...values],
    );
    if (rows[0] === undefined) throw new LeaseLostError(key, owner);
    return toSandbox(rows[0]);
  }
}
