import {
  Subscribers,
  UnknownSessionError,
  type EventPump,
  type AppendOptions,
  type EventMirror,
  type NewEvent,
  type ReadEventsOptions,
  type StoredEvent,
  type SubscribeOptions,
} from "@sandbox-agent/session-store";
import type pg from "pg";
import { toEvent, type EventRow, type Names } from "./sql.js";

/**
 * Appends, reads and live subscriptions of mirrored session events.
 *
 * An append is one statement (one round trip, one implicit transaction): it advances the session's
 * `last_seq` (locking its row, so appends to one session are serialized and commit in sequence order),
 * inserts the batch from one JSON array parameter, and queues a `NOTIFY <seq> <session id>` that
 * PostgreSQL delivers at commit. A reader that sees sequence n therefore also sees 1..n-1, and a
 * notification never arrives before its rows are visible. The payload is a cursor, not the events:
 * NOTIFY payloads are capped at 8,000 bytes, and subscribers read the rows themselves.
 */
export class PostgresEvents implements EventMirror {
  readonly #subscribers = new Subscribers();

  constructor(
    private readonly pool: pg.Pool,
    private readonly n: Names,
    private readonly listener: { start(): void; readonly listening: boolean },
  ) {}

  async append(
    sessionId: string,
    events: readonly NewEvent[],
    options: AppendOptions = {},
  ): Promise<{ firstSeq: number; lastSeq: number }> {
    let lastEventId: string | null = null;
    for (const event of events) if (event.eventId !== undefined) lastEventId = event.eventId;
    // Given explicitly (null included), it replaces the column; otherwise only an eventId moves it.
    const explicit = options.lastEventId !== undefined;
    if (explicit) lastEventId = options.lastEventId ?? null;
    const { rows } = await this.pool.query<{ last_seq: string }>(
      `WITH head AS (
         UPDATE ${this.n.sessions}
            SET last_seq = last_seq + $2,
                last_event_id = CASE WHEN $7 THEN $3 ELSE coalesce($3, last_event_id) END,
                updated_at = now()
          WHERE id = $1
          RETURNING last_seq
       ), appended AS (
         INSERT INTO ${this.n.events} (session_id, seq, event_id, data)
         SELECT $1, head.last_seq - $2 + e.ord, e.event_id, e.data
           FROM head, ROWS FROM (json_array_elements($4::json), unnest($5::text[])) WITH ORDINALITY AS e(data, event_id, ord)
       )
       SELECT last_seq, pg_notify($6, last_seq || ' ' || $1) FROM head`,
      [
        sessionId,
        events.length,
        lastEventId,
        JSON.stringify(events.map((e) => e.data ?? null)),
        events.map((e) => e.eventId ?? null),
        this.n.eventsChannel,
        explicit,
      ],
    );
    if (rows[0] === undefined) throw new UnknownSessionError(sessionId);
    const lastSeq = Number(rows[0].last_seq);
    return { firstSeq: lastSeq - events.length + 1, lastSeq };
  }

  async read(sessionId: string, options: ReadEventsOptions = {}): Promise<StoredEvent[]> {
    const { rows } = await this.pool.query<EventRow>(
      `SELECT seq, event_id, data, created_at FROM ${this.n.events}
        WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
      [sessionId, options.after ?? 0, options.limit ?? 1000],
    );
    return rows.map((row) => toEvent(sessionId, row));
  }

  subscribe(
    sessionId: string,
    listener: (events: StoredEvent[]) => void | Promise<void>,
    options: SubscribeOptions = {},
  ): EventPump {
    const read = (after: number, limit: number) => this.read(sessionId, { after, limit });
    const pump = this.#subscribers.add(sessionId, read, listener, options);
    // Reading before LISTEN is in force could miss an append made in between: the first read waits
    // for `listening()` unless the listener is up already.
    this.listener.start();
    if (this.listener.listening) pump.wake();
    return pump;
  }

  /** From the listener: `<seq> <session id>`. */
  notified(payload: string): void {
    const space = payload.indexOf(" ");
    this.#subscribers.wake(payload.slice(space + 1), Number(payload.slice(0, space)));
  }

  /** From the listener, after each (re)connection: catch up on whatever was appended meanwhile. */
  listening(): void {
    this.#subscribers.wakeAll();
  }

  /** Errors of the shared connection go to every subscriber that asked for them. */
  failed(error: Error): void {
    this.#subscribers.reportAll(error);
  }

  closeAll(): void {
    this.#subscribers.closeAll();
  }
}
