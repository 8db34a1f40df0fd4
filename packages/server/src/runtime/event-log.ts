import { batchLength, type EventBatch } from "../store/event-batch.js";
import type { ConnectionLog } from "../store/event-store.js";

export { batchLength, eventBytes, type EventBatch } from "../store/event-batch.js";

/**
 * The ordered outbound log of one connection, as the runtime sees it: the store's log (bytes off
 * the JS heap, on disk with a data directory), which keeps the events no reader received yet
 * (`hold`) whatever its replay limits, and the size of those, which the backpressure bounds.
 * Events get their sequence number when appended, so a replay reproduces the same id → message
 * mapping, and a reader gets an event only once the store says it is written (`durableSeq`).
 */
export class EventLog {
  /** Size of each event no reader has received yet, oldest first from `head`. */
  private unread: number[] = [];
  private head = 0;
  private unreadBytes = 0;
  /** Highest sequence number handed to a reader at least once. */
  writtenSeq: number;

  constructor(readonly store: ConnectionLog) {
    // After a restart everything already logged counts as delivered: a reader without a cursor gets what comes next.
    this.writtenSeq = store.nextSeq - 1;
    store.hold(this.writtenSeq);
  }

  /** Appends an event given as text (see `ConnectionLog.append`); returns its sequence number. */
  append(data: string): number {
    this.unread.push(data.length);
    this.unreadBytes += data.length;
    return this.store.append(data);
  }

  /** Appends an event given as UTF-8 bytes (see `ConnectionLog.appendBytes`); returns its sequence number. */
  appendBytes(bytes: Uint8Array, start: number, end: number): number {
    this.unread.push(end - start);
    this.unreadBytes += end - start;
    return this.store.appendBytes(bytes, start, end);
  }

  get lastSeq(): number {
    return this.store.nextSeq - 1;
  }

  /** Oldest sequence number a cursor may name: the store's oldest, or any event not read yet. */
  get oldestCursor(): number {
    return Math.min(this.store.oldestCursor, this.writtenSeq);
  }

  /** Size (characters: bytes, or close to bytes for JSON text) of events no reader has received yet. */
  get unwrittenBytes(): number {
    return this.unreadBytes;
  }

  /**
   * Events with seq > cursor that may be delivered, about `maxBytes` of them (at least one, if
   * there is one), as views valid until the next append (see `EventBatch`).
   */
  after(cursor: number, maxBytes: number): EventBatch | undefined {
    const batch = this.store.read(cursor, maxBytes);
    return batch === undefined || batchLength(batch) === 0 ? undefined : batch;
  }

  /** Records that events up to `seq` reached a reader: they leave the unread queue. */
  markWritten(seq: number): void {
    if (seq <= this.writtenSeq) return;
    const to = Math.min(this.head + (seq - this.writtenSeq), this.unread.length);
    for (let i = this.head; i < to; i++) this.unreadBytes -= this.unread[i]!;
    this.head = to;
    this.writtenSeq = seq;
    this.store.hold(seq);
    // A reader that caught up (nearly every read) empties the queue. This runs from a connection's
    // first reads, so the code TurboFan compiles for `Outbound.read` (inlined into the SSE pump)
    // has it in its type feedback. The compaction below alone ran first at about the 1,025th
    // event, inside that compiled code: it deoptimised the pump at about every server's 512th echo
    // turn, which recompiled it and its callees (bench/README.md, "Cold window, deoptimisations").
    if (this.head === this.unread.length) {
      this.unread = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.unread.length) {
      // A reader that stays behind: compact occasionally so the array does not grow forever.
      this.unread = this.unread.slice(this.head);
      this.head = 0;
    }
  }
}
