export type OutputStream = "stdout" | "stderr";

/** One chunk of a process' output. `seq` numbers chunks of both streams in arrival order from 1. */
export interface OutputEntry {
  seq: number;
  stream: OutputStream;
  /** Byte offset of `data` within its stream (bytes written to that stream before it). */
  offset: number;
  data: Buffer;
}

/** Someone reading the log in order (a follower, a terminal viewer): `cursor` is the last seq it got. */
export interface LogCursor {
  cursor: number;
}

/**
 * A process' output, in order, bounded by bytes. The oldest chunks are dropped past `maxBytes`,
 * except chunks an attached reader has not read yet: then the log grows past its bound and
 * `overLimit` tells the owner to stop reading the process until the reader catches up, so a
 * follower never misses output while the process runs ahead of it.
 */
export class OutputLog {
  private entries: OutputEntry[] = [];
  private head = 0;
  private retained = 0;
  private readonly written: Record<OutputStream, number> = { stdout: 0, stderr: 0 };
  private readonly readers = new Set<LogCursor>();
  /** Seq of the newest chunk; 0 while there is none. */
  lastSeq = 0;
  /** Bytes dropped from the front of the log. */
  droppedBytes = 0;

  constructor(private readonly maxBytes: number) {}

  append(stream: OutputStream, data: Buffer): OutputEntry {
    const entry = { seq: ++this.lastSeq, stream, offset: this.written[stream], data };
    this.written[stream] += data.length;
    this.entries.push(entry);
    this.retained += data.length;
    this.evict();
    return entry;
  }

  /** Bytes written to each stream so far. */
  get bytes(): Readonly<Record<OutputStream, number>> {
    return this.written;
  }

  /** The oldest cursor that can still be served: one before the first retained chunk. */
  get oldestCursor(): number {
    return this.entries.length > this.head ? this.entries[this.head]!.seq - 1 : this.lastSeq;
  }

  /** Whether attached readers hold more than `maxBytes` (the owner pauses the process' output). */
  get overLimit(): boolean {
    return this.retained > this.maxBytes;
  }

  /** Chunks after `cursor`, up to about `maxBytes` (at least one when there is one). */
  after(cursor: number, maxBytes = Infinity): OutputEntry[] {
    const from = this.head + Math.max(0, cursor + 1 - (this.oldestCursor + 1));
    let to = from;
    for (let bytes = 0; to < this.entries.length && (to === from || bytes < maxBytes); to++)
      bytes += this.entries[to]!.data.length;
    return this.entries.slice(from, to);
  }

  /** The cursor from which the last `bytes` (or a little more, whole chunks) of output follow. */
  cursorForTail(bytes: number): number {
    let total = 0;
    let i = this.entries.length;
    while (i > this.head && total < bytes) total += this.entries[--i]!.data.length;
    return i < this.entries.length ? this.entries[i]!.seq - 1 : this.lastSeq;
  }

  /** Registers a reader whose unread chunks must not be dropped. */
  attach(reader: LogCursor): void {
    this.readers.add(reader);
  }

  detach(reader: LogCursor): void {
    this.readers.delete(reader);
    this.evict();
  }

  /** Called after a reader advanced its cursor: drops what nobody needs any more. */
  advanced(): void {
    this.evict();
  }

  private evict(): void {
    let pinned = Infinity;
    for (const reader of this.readers) pinned = Math.min(pinned, reader.cursor);
    while (this.retained > this.maxBytes && this.head < this.entries.length) {
      const oldest = this.entries[this.head]!;
      if (oldest.seq > pinned) break;
      this.retained -= oldest.data.length;
      this.droppedBytes += oldest.data.length;
      this.head++;
    }
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }
}

/**
 * Holds back a UTF-8 sequence split across two reads, so every chunk decodes on its own (the
 * `utf8` encoding of the logs then never shows a replacement character for valid UTF-8 output).
 * Bytes that are not UTF-8 pass through unchanged.
 */
export class Utf8Boundary {
  private carry: Buffer | undefined;

  split(chunk: Buffer): Buffer {
    const data = this.carry ? Buffer.concat([this.carry, chunk]) : chunk;
    this.carry = undefined;
    const cut = incompleteTail(data);
    if (cut === data.length) return data;
    this.carry = data.subarray(cut);
    return data.subarray(0, cut);
  }

  flush(): Buffer | undefined {
    const rest = this.carry;
    this.carry = undefined;
    return rest;
  }
}

/** Index where an incomplete trailing UTF-8 sequence starts, or `data.length` when there is none. */
function incompleteTail(data: Buffer): number {
  for (let back = 1; back <= Math.min(3, data.length); back++) {
    const byte = data[data.length - back]!;
    if (byte < 0x80) return data.length; // ASCII: complete
    if (byte < 0xc0) continue; // continuation byte: look further back
    const needed = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : 2;
    return back < needed ? data.length - back : data.length;
  }
  return data.length;
}
