/** One SSE event: a JSON-RPC message line with its per-connection sequence number. */
export interface LoggedEvent {
  seq: number;
  data: string;
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
 */
export class EventLog {
  private events: LoggedEvent[] = [];
  private head = 0; // index of the oldest retained event in `events`
  private retainedBytes = 0;
  private nextSeq = 1;
  private unwritten = 0;
  /** Highest sequence number handed to a stream at least once. */
  writtenSeq = 0;

  constructor(private readonly limits: EventLogLimits) {}

  append(data: string): LoggedEvent {
    const event = { seq: this.nextSeq++, data };
    this.events.push(event);
    this.retainedBytes += data.length;
    this.unwritten += data.length;
    return event;
  }

  get lastSeq(): number {
    return this.nextSeq - 1;
  }

  /** Oldest sequence number a cursor may name: one before the first retained event. */
  get oldestCursor(): number {
    const first = this.events[this.head];
    return first ? first.seq - 1 : this.lastSeq;
  }

  /** Size (UTF-16 code units, close to bytes for JSON) of events no stream has received yet. */
  get unwrittenBytes(): number {
    return this.unwritten;
  }

  /** Events with seq > cursor, at most `maxBytes` worth (always at least one). */
  after(cursor: number, maxBytes: number): LoggedEvent[] {
    const first = this.events[this.head];
    if (!first) return [];
    let index = this.head + Math.max(0, cursor + 1 - first.seq);
    const batch: LoggedEvent[] = [];
    let bytes = 0;
    for (; index < this.events.length && (batch.length === 0 || bytes < maxBytes); index++) {
      const event = this.events[index]!;
      batch.push(event);
      bytes += event.data.length;
    }
    return batch;
  }

  /** Records that events up to `seq` reached a stream, then evicts what the replay limits allow. */
  markWritten(seq: number): void {
    if (seq <= this.writtenSeq) return;
    const first = this.events[this.head];
    if (first) {
      const from = this.head + Math.max(0, this.writtenSeq + 1 - first.seq);
      const to = this.head + (seq - first.seq);
      for (let i = from; i <= to && i < this.events.length; i++)
        this.unwritten -= this.events[i]!.data.length;
    }
    this.writtenSeq = seq;
    this.evict();
  }

  private evict(): void {
    const { replayEvents, replayBytes } = this.limits;
    while (this.head < this.events.length) {
      const oldest = this.events[this.head]!;
      const count = this.events.length - this.head;
      if (oldest.seq > this.writtenSeq || (count <= replayEvents && this.retainedBytes <= replayBytes)) break;
      this.retainedBytes -= oldest.data.length;
      this.head++;
    }
    // Compact occasionally so the array does not grow forever.
    if (this.head > 1024 && this.head * 2 > this.events.length) {
      this.events = this.events.slice(this.head);
      this.head = 0;
    }
  }
}
