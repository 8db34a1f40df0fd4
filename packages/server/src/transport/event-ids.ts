/**
 * The `/v2/rpc` event id format, shared by both transports: `<epoch>.<seq>` out (an SSE event's
 * `id:`, a WebSocket's resume point), and `Last-Event-ID` → cursor in.
 */
import { problems } from "../http/problem.js";
import type { Connection } from "../runtime/connection.js";

/**
 * An event's id: the connection's epoch (so that a cursor from another connection is recognised)
 * and its sequence number.
 */
export function eventId(epoch: string, seq: number): string {
  return `${eventIdPrefix(epoch)}${seq}`;
}

/** What every event id of `epoch` starts with: an id is this and its seq in decimal (`eventId`). */
export function eventIdPrefix(epoch: string): string {
  return `${epoch}.`;
}

const EVENT_ID = /^([0-9a-f]{8})\.(\d{1,15})$/;

/**
 * The cursor a `Last-Event-ID` names on `conn`: `undefined` without one; a 400 problem when it is
 * malformed, a 410 when it belongs to another connection, was never sent, or is older than what
 * the connection can still replay.
 */
export function cursorOf(conn: Connection, lastEventId: string | undefined): number | undefined {
  if (lastEventId === undefined) return undefined;
  const m = EVENT_ID.exec(lastEventId);
  if (!m) throw problems.badRequest(`Malformed Last-Event-ID ${JSON.stringify(lastEventId)}.`);
  const seq = Number(m[2]);
  if (m[1] !== conn.epoch || !conn.canReplayFrom(seq)) {
    throw problems.gone(
      "Last-Event-ID is not in this connection's replay log (evicted or foreign); events after it can't be replayed.",
      { oldestEventId: eventId(conn.epoch, conn.oldestCursor) },
    );
  }
  return seq;
}
