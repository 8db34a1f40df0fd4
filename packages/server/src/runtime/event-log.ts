import type { ConnectionLog, EventBatch } from "../store/event-store.js";

export type { EventBatch } from "../store/event-store.js";

/**
 * The ordered outbound log of one connection, as the runtime sees it: the store's log (bytes off
 * the JS heap, on disk with a data directory) plus the events no reader received yet, kept as the
 * strings they arrived as. Those die young once read (a scavenge collects them); only the store
 * keeps events for replay. Events get their sequence number when appended, so a replay reproduces
 * the same id → message mapping, and a reader gets an event only once the store says it is
 * written (`durableSeq`).
 */
export class EventLog {
  private unread: string[] = [];
  private head = 0; // index of the oldest unread event in `unread`
  private unreadBytes = 0;
  /** Highest sequence number handed to a reader at least once. */
  writtenSeq: number;

  constructor(readonly store: ConnectionLog) {
    // After a restart everything already logged counts as delivered: a reader without a cursor gets what comes next.
    this.writtenSeq = store.nextSeq - 1;
  }

  /** Appends an event; returns its sequence number. */
  append(data: string): number {
    this.unread.push(data);
    this.unreadBytes += data.length;
    return this.store.append(data);
  }

  get lastSeq(): number {
    return this.store.nextSeq - 1;
  }

  /** Oldest sequence number a cursor may name: the store's oldest, or any event not read yet. */
  get oldestCursor(): number {
    return Math.min(this.store.oldestCursor, this.writtenSeq);
  }

  /** Size (UTF-16 code units, close to bytes for JSON) of events no reader has received yet. */
  get unwrittenBytes(): number {
    return this.unreadBytes;
  }

  /** Events with seq > cursor that may be delivered, about `maxBytes` of them (at least one, if there is one). */
  after(cursor: number, maxBytes: number): EventBatch | undefined {
    if (cursor < this.writtenSeq) return this.store.read(cursor, maxBytes);
    const durable = this.store.durableSeq;
    const from = this.head + (cursor - this.writtenSeq);
    let to = from;
    for (
      let bytes = 0;
      to < this.unread.length && cursor + 1 + (to - from) <= durable && (to === from || bytes < maxBytes);
      to++
    )
      bytes += this.unread[to]!.length;
    return to === from ? undefined : { first: cursor + 1, data: this.unread.slice(from, to) };
  }

  /** Records that events up to `seq` reached a reader: they leave the unread queue. */
  markWritten(seq: number): void {
    if (seq <= this.writtenSeq) return;
    const to = Math.min(this.head + (seq - this.writtenSeq), this.unread.length);
    for (let i = this.head; i < to; i++) this.unreadBytes -= this.unread[i]!.length;
    this.head = to;
    this.writtenSeq = seq;
    // Compact occasionally so the array does not grow forever.
    if (this.head > 1024 && this.head * 2 > this.unread.length) {
      this.unread = this.unread.slice(this.head);
      this.head = 0;
    }
  }
}
