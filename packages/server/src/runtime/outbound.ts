import { CorruptLogError } from "../store/event-store.js";
import { batchLength, type EventBatch, type EventLog } from "./event-log.js";
import { microtask } from "./microtask.js";

/** What a transport is told about its reader. */
export interface ReaderListener {
  /** Events are waiting: `read()` them while the transport can write. */
  readable(): void;
  /** The reader is done: another reader took over, or the connection closed. End the stream. */
  end(): void;
}

/**
 * A transport's view of a connection's outbound events, in order, from a cursor. It holds no
 * HTTP objects: an SSE body (`transport/sse.ts`) or any other transport pulls batches from it as
 * fast as its own socket takes them, and that pace is what holds the agent back.
 */
export interface OutboundReader {
  /** Sequence number of the last event read (the cursor the reader was opened at, at first). */
  readonly cursor: number;
  /**
   * The next events after the cursor, about `maxBytes` of them (at least one); undefined when none
   * is ready. The batch's bytes are valid until the transport returns (see `EventBatch`).
   */
  read(maxBytes: number): EventBatch | undefined;
  /** The connection ended and every event was read: nothing more will come. */
  readonly finished: boolean;
  /** The transport is gone (client disconnected). */
  close(): void;
}

export interface OutboundOptions {
  /** Undelivered bytes past which the producer is paused (and resumed at half). */
  maxBufferedBytes: number;
  /** Output paused this long (no reader progress) is reported through `stalled`. */
  stallMs: number;
  pause(): void;
  resume(): void;
  stalled(pendingBytes: number): void;
  /** A reader was opened or closed (the connection's idle clock restarts). */
  readerChanged(): void;
  /** A segment on disk could not be read: the events through `error.throughSeq` are dropped. */
  corrupt(error: CorruptLogError): void;
}

/**
 * The outbound side of a connection: its ordered event log and at most one reader. Events are
 * appended as the agent (or the server) produces them and read by the reader from its cursor; a
 * new reader takes over from the previous one. Backpressure: while more than `maxBufferedBytes`
 * were never read, the producer is paused.
 */
export class Outbound {
  private reader: Reader | undefined;
  private notifyScheduled = false;
  private readonly committed: Array<() => void> = [];
  private paused = false;
  private stallTimer: NodeJS.Timeout | undefined;
  private ended = false;
  private closed = false;

  constructor(
    readonly log: EventLog,
    private readonly options: OutboundOptions,
  ) {
    // Events become readable once written (with `fsync`, once synced; after a failed write, once retried).
    log.store.onDurable = () => this.reader?.listener.readable();
  }

  get hasReader(): boolean {
    return this.reader !== undefined;
  }

  /** Appends one event (a JSON-RPC message on one line; see `ConnectionLog.append`). */
  append(data: string): void {
    if (this.closed) return;
    this.log.append(data);
    this.appended();
  }

  /** Appends one event as UTF-8 bytes (see `ConnectionLog.appendBytes`). */
  appendBytes(bytes: Uint8Array, start: number, end: number): void {
    if (this.closed) return;
    this.log.appendBytes(bytes, start, end);
    this.appended();
  }

  private appended(): void {
    this.updateBackpressure(false);
    this.scheduleCommit();
  }

  /**
   * Runs `fn` once the events appended so far, and those appended in the same turn of the event
   * loop, are written: a record that says a request was answered must not reach the disk before
   * the answer does.
   */
  afterCommit(fn: () => void): void {
    this.committed.push(fn);
    this.scheduleCommit();
  }

  private scheduleCommit(): void {
    if (this.notifyScheduled) return;
    this.notifyScheduled = true;
    microtask(this.commitNow);
  }

  /**
   * Lines parsed from one stdout chunk arrive synchronously: the reader gets them in one batch.
   * They are written to the store together, before any of them can be read (write before deliver):
   * the store's `commit` does not wake the reader (`onDurable` is for what becomes durable later),
   * this does, once. One function for every commit, not a closure each.
   */
  private readonly commitNow = (): void => {
    this.notifyScheduled = false;
    this.log.store.commit();
    if (this.committed.length > 0) for (const fn of this.committed.splice(0)) fn();
    this.reader?.listener.readable();
  };

  /** Opens the reader at `cursor` (default: after the last event any reader received), ending the previous one. */
  openReader(cursor: number | undefined, listener: ReaderListener): OutboundReader {
    const previous = this.reader;
    const reader = new Reader(this, cursor ?? this.log.writtenSeq, listener);
    this.reader = reader;
    this.options.readerChanged();
    previous?.listener.end();
    if (this.closed) listener.end();
    return reader;
  }

  /** Whether `seq` is a cursor a reader may still resume from. */
  canReplayFrom(seq: number): boolean {
    return seq <= this.log.lastSeq && seq >= this.log.oldestCursor;
  }

  /** Whether a reader at `cursor` (default: never-read events) would get nothing more, the connection having ended. */
  drained(cursor: number | undefined): boolean {
    return this.ended && (cursor ?? this.log.writtenSeq) >= this.log.lastSeq;
  }

  /** No more events will be appended (the connection ended): the reader finishes once it caught up. */
  end(): void {
    this.ended = true;
    this.reader?.listener.readable();
  }

  /** The connection is closed for good: the reader ends now. */
  close(): void {
    this.closed = true;
    clearTimeout(this.stallTimer);
    const reader = this.reader;
    this.reader = undefined;
    reader?.listener.end();
  }

  /** @internal */
  read(reader: Reader, maxBytes: number): EventBatch | undefined {
    if (reader !== this.reader) return undefined;
    let batch: EventBatch | undefined;
    try {
      batch = this.log.after(reader.cursor, maxBytes);
    } catch (error) {
      if (!(error instanceof CorruptLogError)) throw error;
      // What cannot be read is dropped; the reader reconnecting at its cursor is told so (410).
      this.log.store.dropThrough(error.throughSeq);
      this.options.corrupt(error);
      this.endReader(reader);
      return undefined;
    }
    if (batch === undefined) {
      // A reader that fell behind retention: what it needs next is gone. Its reconnect at its
      // cursor is told so (410), instead of a stream that waits forever.
      if (reader.cursor < this.log.oldestCursor) this.endReader(reader);
      return undefined;
    }
    reader.cursor = batch.first + batchLength(batch) - 1;
    this.log.markWritten(reader.cursor);
    this.updateBackpressure(true);
    return batch;
  }

  private endReader(reader: Reader): void {
    this.detach(reader);
    microtask(() => reader.listener.end());
  }

  /** @internal */
  finished(reader: Reader): boolean {
    return this.ended && reader.cursor >= this.log.lastSeq;
  }

  /** @internal */
  detach(reader: Reader): void {
    if (this.reader !== reader) return;
    this.reader = undefined;
    this.options.readerChanged();
  }

  /** `progress`: the reader just read (the stall clock restarts); else an event was appended. */
  private updateBackpressure(progress: boolean): void {
    const { maxBufferedBytes, stallMs } = this.options;
    const pending = this.log.unwrittenBytes;
    if (!this.paused && pending > maxBufferedBytes) {
      this.paused = true;
      this.options.pause();
    } else if (this.paused && pending <= maxBufferedBytes / 2) {
      this.paused = false;
      this.options.resume();
    }
    if (this.paused) {
      // Restarted when the reader made progress, so it fires only when the reader stays stuck; not
      // on every event appended while paused (the rest of the agent's chunk), a timer each.
      if (!progress && this.stallTimer !== undefined) return;
      clearTimeout(this.stallTimer);
      this.stallTimer = setTimeout(() => this.options.stalled(pending), stallMs);
      this.stallTimer.unref();
    } else if (this.stallTimer) {
      clearTimeout(this.stallTimer);
      this.stallTimer = undefined;
    }
  }
}

class Reader implements OutboundReader {
  constructor(
    private readonly outbound: Outbound,
    public cursor: number,
    readonly listener: ReaderListener,
  ) {}

  read(maxBytes: number): EventBatch | undefined {
    return this.outbound.read(this, maxBytes);
  }

  get finished(): boolean {
    return this.outbound.finished(this);
  }

  close(): void {
    this.outbound.detach(this);
  }
}
