/** Consecutive events: `data[i]` has sequence number `first + i`. */
export interface EventBatch {
  first: number;
  data: string[];
}

export interface EventLogLimits {
  /** Delivered events kept for `Last-Event-ID` replay, by count… */
  replayEvents: number;
  /** …and by bytes. */
  replayBytes: number;
}

/**
 * The ordered outbound log of one connection. Events get their sequence number when appended, so
 * a replay reproduces the same id → message mapping. Events that were never written to a stream
 * are never evicted: they are the undelivered queue, bounded by backpressure on the agent instead.
 *
 * Events are kept as bare strings, their sequence numbers implied by position: the log retains
 * up to `replayEvents` of them at a time, and at full stream rate a wrapper object per event
 * doubled the garbage collector's work of moving them out of the young generation.
 */
export class EventLog {
  private events: string[] = [];
  private head = 0; // index of the oldest retained event in `events`
  private headSeq = 1; // its sequence number
  private retainedBytes = 0;
  private unwritten = 0;
  /** Highest sequence number handed to a stream at least once. */
  writtenSeq = 0;

  constructor(private readonly limits: EventLogLimits) {}

  /** Appends an event; returns its sequence number. */
  append(data: string): number {
    this.events.push(data);
    this.retainedBytes += data.length;
    this.unwritten += data.length;
    return this.lastSeq;
  }

  get lastSeq(): number {
    return this.headSeq + (this.events.length - this.head) - 1;
  }

  /** Oldest sequence number a cursor may name: one before the first retained event. */
  get oldestCursor(): number {
    return this.headSeq - 1;
  }

  /** Size (UTF-16 code units, close to bytes for JSON) of events no stream has received yet. */
  get unwrittenBytes(): number {
    return this.unwritten;
  }

  /** Events with seq > cursor, at most `maxBytes` worth (always at least one, if there is one). */
  after(cursor: number, maxBytes: number): EventBatch {
    const first = Math.max(cursor + 1, this.headSeq);
    const from = this.indexOf(first);
    let to = from;
    for (let bytes = 0; to < this.events.length && (to === from || bytes < maxBytes); to++)
      bytes += this.events[to]!.length;
    return { first, data: this.events.slice(from, to) };
  }

  /** Records that events up to `seq` reached a stream, then evicts what the replay limits allow. */
  markWritten(seq: number): void {
    if (seq <= this.writtenSeq) return;
    const to = Math.min(this.indexOf(seq), this.events.length - 1);
    for (let i = this.indexOf(Math.max(this.writtenSeq + 1, this.headSeq)); i <= to; i++)
      this.unwritten -= this.events[i]!.length;
    this.writtenSeq = seq;
    this.evict();
  }

  private indexOf(seq: number): number {
    return this.head + (seq - this.headSeq);
  }

  private evict(): void {
    const { replayEvents, replayBytes } = this.limits;
    while (this.head < this.events.length) {
      const count = this.events.length - this.head;
      if (this.headSeq > this.writtenSeq || (count <= replayEvents && this.retainedBytes <= replayBytes))
        break;
      this.retainedBytes -= this.events[this.head]!.length;
      this.head++;
      this.headSeq++;
    }
    // Compact occasionally so the array does not grow forever.
    if (this.head > 1024 && this.head * 2 > this.events.length) {
      this.events = this.events.slice(this.head);
      this.head = 0;
    }
  }
}
