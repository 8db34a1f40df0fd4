import type { Connection } from "./connection.js";
import type { ConnectionExtension, SessionDescription } from "./extension.js";

/** A connection as `GET /v2/connections` lists it: plain data copied out of the runtime. */
export interface ConnectionSnapshot {
  id: string;
  agentId: string;
  state: Connection["state"];
  /** The agent's process id while it runs. */
  pid: number | null;
  /** ISO 8601. */
  createdAt: string;
  /** Last request, answer or reader change (ISO 8601): the idle timer counts from it. */
  lastActivityAt: string;
  /** Whether a client holds the connection's event stream now. */
  attached: boolean;
  /** Events on the connection's stream so far (the sequence number of the last one). */
  eventCount: number;
  /** Id of the last event (`<epoch>.<seq>`), null before the first. */
  lastEventId: string | null;
  /** The `protocolVersion` the agent answered to initialize. */
  protocolVersion: number | null;
  exitCode: number | null;
  signal: string | null;
  sessions: SessionDescription[];
}

/** Copies what the list shows; session metadata comes from the extensions that keep it. */
export function snapshotOf(
  conn: Connection,
  lastSeq: number,
  extensions: readonly ConnectionExtension[],
): ConnectionSnapshot {
  return {
    id: conn.id,
    agentId: conn.agentId,
    state: conn.state,
    pid: conn.exit === undefined ? (conn.pid ?? null) : null,
    createdAt: conn.createdAt,
    lastActivityAt: new Date(conn.lastActivity).toISOString(),
    attached: conn.hasReader,
    eventCount: lastSeq,
    lastEventId: lastSeq > 0 ? `${conn.epoch}.${lastSeq}` : null,
    protocolVersion: conn.protocolVersion ?? null,
    exitCode: conn.exit?.code ?? null,
    signal: conn.exit?.signal ?? null,
    sessions: [...conn.sessionIds].map((id) => describeSession(conn, id, extensions)),
  };
}

function describeSession(
  conn: Connection,
  sessionId: string,
  extensions: readonly ConnectionExtension[],
): SessionDescription {
  for (const ext of extensions) {
    const description = ext.describeSession?.(sessionId, conn);
    if (description !== undefined) return description;
  }
  return {
    sessionId,
    title: null,
    cwd: null,
    model: null,
    createdAt: null,
    updatedAt: null,
    ended: false,
    eventCount: 0,
    metadata: {},
  };
}
