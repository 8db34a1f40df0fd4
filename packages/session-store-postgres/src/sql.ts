import type {
  SandboxPatch,
  SandboxRecord,
  SandboxStatus,
  SessionRecord,
  StoredEvent,
} from "@sandbox-agent/session-store";

/**
 * First key of every advisory lock this driver takes (two-key form, a key space of its own: it never
 * collides with an application's single-key locks). The value is arbitrary and fixed forever.
 */
export const LOCK_CLASS = 0x5a_67_65_6e; // "Zgen"

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,40}$/;

/** The names one schema uses: quoted tables and notification channels. */
export interface Names {
  schema: string;
  sandboxes: string;
  queue: string;
  sessions: string;
  events: string;
  /** Channel: `<seq> <session id>` after each append. */
  eventsChannel: string;
  /** Channel: `[provider, key]` (JSON) after a sandbox's status or lease changes. */
  sandboxesChannel: string;
}

export function names(schema: string): Names {
  if (!SCHEMA_NAME.test(schema)) {
    throw new TypeError(
      `schema must match ${SCHEMA_NAME} (lower case, digits, underscores), got "${schema}"`,
    );
  }
  const s = `"${schema}"`;
  return {
    schema,
    sandboxes: `${s}.sandboxes`,
    queue: `${s}.capacity_queue`,
    sessions: `${s}.sessions`,
    events: `${s}.session_events`,
    eventsChannel: `${schema}_events`,
    sandboxesChannel: `${schema}_sandboxes`,
  };
}

export interface SandboxRow {
  key: string;
  provider: string;
  provider_id: string | null;
  endpoint: string | null;
  status: SandboxStatus;
  lease_owner: string | null;
  lease_expires_at: Date | null;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  last_active_at: Date;
}

export function toSandbox(row: SandboxRow): SandboxRecord {
  return {
    key: row.key,
    provider: row.provider,
    providerId: row.provider_id,
    endpoint: row.endpoint,
    status: row.status,
    lease:
      row.lease_owner === null
        ? null
        : { owner: row.lease_owner, expiresAt: row.lease_expires_at!.getTime() },
    metadata: row.metadata,
    createdAt: row.created_at.getTime(),
    updatedAt: row.updated_at.getTime(),
    lastActiveAt: row.last_active_at.getTime(),
  };
}

/** `SET` assignments for a patch, with parameters numbered from `first`. */
export function patchAssignments(patch: SandboxPatch, first: number): { sql: string; values: unknown[] } {
  const sets = ["updated_at = now()"];
  const values: unknown[] = [];
  const set = (column: string, value: unknown): void => {
    values.push(value);
    sets.push(`${column} = $${first + values.length - 1}`);
  };
  if (patch.providerId !== undefined) set("provider_id", patch.providerId);
  if (patch.endpoint !== undefined) set("endpoint", patch.endpoint);
  if (patch.status !== undefined) set("status", patch.status);
  if (patch.metadata !== undefined) set("metadata", JSON.stringify(patch.metadata));
  if (patch.touch) sets.push("last_active_at = now()");
  return { sql: sets.join(", "), values };
}

export interface SessionRow {
  id: string;
  sandbox_key: string;
  agent: string;
  connection_id: string | null;
  agent_session_id: string | null;
  metadata: Record<string, unknown>;
  last_event_id: string | null;
  last_seq: string;
  created_at: Date;
  updated_at: Date;
}

export function toSession(row: SessionRow): SessionRecord {
  return {
    id: row.id,
    sandboxKey: row.sandbox_key,
    agent: row.agent,
    connectionId: row.connection_id,
    agentSessionId: row.agent_session_id,
    metadata: row.metadata,
    lastEventId: row.last_event_id,
    lastSeq: Number(row.last_seq),
    createdAt: row.created_at.getTime(),
    updatedAt: row.updated_at.getTime(),
  };
}

export interface EventRow {
  seq: string;
  event_id: string | null;
  data: unknown;
  created_at: Date;
}

export function toEvent(sessionId: string, row: EventRow): StoredEvent {
  return {
    sessionId,
    seq: Number(row.seq),
    eventId: row.event_id,
    data: row.data,
    createdAt: row.created_at.getTime(),
  };
}

/** `now() + <ms> milliseconds` for a numeric parameter. */
export const later = (param: string): string => `now() + ${param} * interval '1 millisecond'`;
