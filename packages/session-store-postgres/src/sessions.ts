import {
  SessionExistsError,
  UnknownSessionError,
  checkId,
  type ListSessionsOptions,
  type NewSession,
  type SessionPatch,
  type SessionRecord,
  type SessionRecords,
} from "@sandbox-agent/session-store";
import type pg from "pg";
import { toSession, type Names, type SessionRow } from "./sql.js";

const COLUMNS: Record<keyof SessionPatch, string> = {
  sandboxKey: "sandbox_key",
  connectionId: "connection_id",
  agentSessionId: "agent_session_id",
  metadata: "metadata",
  lastEventId: "last_event_id",
};

export class PostgresSessions implements SessionRecords {
  constructor(
    private readonly pool: pg.Pool,
    private readonly n: Names,
  ) {}

  async create(session: NewSession): Promise<SessionRecord> {
    checkId("session id", session.id);
    checkId("sandbox key", session.sandboxKey);
    const { rows } = await this.pool.query<SessionRow>(
      `INSERT INTO ${this.n.sessions} (id, sandbox_key, agent, connection_id, agent_session_id, metadata, last_event_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING RETURNING *`,
      [
        session.id,
        session.sandboxKey,
        session.agent,
        session.connectionId ?? null,
        session.agentSessionId ?? null,
        JSON.stringify(session.metadata ?? {}),
        session.lastEventId ?? null,
      ],
    );
    if (rows[0] === undefined) throw new SessionExistsError(session.id);
    return toSession(rows[0]);
  }

  async get(id: string): Promise<SessionRecord | undefined> {
    const { rows } = await this.pool.query<SessionRow>(`SELECT * FROM ${this.n.sessions} WHERE id = $1`, [
      id,
    ]);
    return rows[0] && toSession(rows[0]);
  }

  async list(options: ListSessionsOptions = {}): Promise<SessionRecord[]> {
    const { rows } =
      options.sandboxKey === undefined
        ? await this.pool.query<SessionRow>(`SELECT * FROM ${this.n.sessions} ORDER BY created_at, id`)
        : await this.pool.query<SessionRow>(
            `SELECT * FROM ${this.n.sessions} WHERE sandbox_key = $1 ORDER BY created_at, id`,
            [options.sandboxKey],
          );
    return rows.map(toSession);
  }

  async update(id: string, patch: SessionPatch): Promise<SessionRecord> {
    const sets = ["updated_at = now()"];
    const values: unknown[] = [id];
    for (const [field, column] of Object.entries(COLUMNS) as [keyof SessionPatch, string][]) {
      const value = patch[field];
      if (value === undefined) continue;
      values.push(field === "metadata" ? JSON.stringify(value) : value);
      sets.push(`${column} = $${values.length}`);
    }
    const { rows } = await this.pool.query<SessionRow>(
      `UPDATE ${this.n.sessions} SET ${sets.join(", ")} WHERE id = $1 RETURNING *`,
      values,
    );
    if (rows[0] === undefined) throw new UnknownSessionError(id);
    return toSession(rows[0]);
  }

  async delete(id: string): Promise<void> {
    await this.pool.query(
      `WITH events AS (DELETE FROM ${this.n.events} WHERE session_id = $1)
       DELETE FROM ${this.n.sessions} WHERE id = $1`,
      [id],
    );
  }
}
