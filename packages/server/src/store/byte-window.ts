import { emptyBatch, pushEvent, type EventBatch } from "./event-batch.js";
import { FRAME_HEADER_BYTES, RECORD_HEADER_BYTES, sealFrame } from "./frames.js";

export type { EventBatch } from "./event-batch.js";

const EMPTY = Buffer.alloc(0);

/**
 * Sealed frames for the segment writer, oldest first: `bufs[i]` from `starts[i]` to `ends[i]`, for
 * `i` below `count` (the arrays may be longer; `markTaken` empties what was used). One shape whether the frames lie in one slab
 * (almost always) or across slabs (a slab is left only when full): a range of one slab and views of
 * several had `sealed` and the segment `write` run code at a new slab that they had not run before
 * TurboFan compiled them, and deoptimise there (2 of 11 fresh servers' first 500 echo turns).
 */
export interface FrameRanges {
  count: number;
  bufs: Buffer[];
  starts: number[];
  ends: number[];
}

/** Ranges with room for `capacity` of them, none used. */
export function frameRanges(capacity = 4): FrameRanges {
  return {
    count: 0,
    bufs: new Array<Buffer>(capacity).fill(EMPTY),
    starts: new Array<number>(capacity).fill(0),
    ends: new Array<number>(capacity).fill(0),
  };
}

export interface WindowLimits {
  /** Events kept, by count… */
  maxEvents: number;
  /** …and by bytes (UTF-8, with their framing). */
  maxBytes: number;
}

/** First slab size; each new slab doubles it, up to `MAX_SLAB_BYTES`, so idle connections stay small. */
const MIN_SLAB_BYTES = 4 * 1024;
const MAX_SLAB_BYTES = 1024 * 1024;

/** A buffer of consecutive events in log format (`frames.ts`), the newest last. */
interface Slab {
  buf: Buffer;
  used: number;
  firstSeq: number;
  count: number;
  /** Byte offset of each event's record in `buf`. */
  offsets: Uint32Array;
  /** Start of the frame being filled, or -1. */
  frameStart: number;
  frameCount: number;
  /** Bytes the segment writer has written (`markTaken`). */
  taken: number;
}

/**
 * The newest events of a connection as bytes outside the JS heap. Retaining them as strings made
 * up to 10,000 long-lived objects per connection that every full garbage collection had to visit
 * (3–10 ms pauses, the largest part of the server's p99); here a connection's window is a handful
 * of slabs (`Buffer.allocUnsafeSlow`, not pooled) and a typed array of offsets per slab.
 *
 * The bytes are already in the on-disk format: events go into frames, and `sealed` hands the
 * sealed frames to the segment writer as they are, so a commit is one `write` of bytes already
 * here. The oldest events are dropped past `limits` (a whole slab is released once all its events
 * are).
 */
export class ByteWindow {
  private slabs: Slab[] = [];
  private spare: Buffer | undefined;
  private nextSlabBytes = MIN_SLAB_BYTES;
  /** Oldest seq still readable (events before it in the first slab were dropped). */
  private first: number;
  private next: number;
  /** Bytes used in all slabs; the window's size is this less what precedes `first` in the oldest slab. */
  private usedBytes = 0;
  /** Events after this seq are kept by `trim` (`hold`). */
  private held = Infinity;
  /** What `sealed` returns, reused. */
  private readonly ranges = frameRanges();

  constructor(
    private readonly limits: WindowLimits,
    firstSeq: number,
    /** Whether frames are sealed (headers and checksums written): only a window backed by a file needs it. */
    private readonly sealFrames: boolean,
  ) {
    this.first = firstSeq;
    this.next = firstSeq;
  }

  /** The seq the next appended event gets. */
  get nextSeq(): number {
    return this.next;
  }

  /** The oldest seq the window can still read. */
  get firstSeq(): number {
    return this.first;
  }

  /** Appends one event, its JSON as text (encoded to UTF-8 here); returns its seq. */
  append(data: string): number {
    // UTF-8 of a UTF-16 string is at most 3 bytes per unit.
    let slab = this.slabs.at(-1);
    if (!slab || !this.fits(slab, data.length * 3)) {
      const exact = Buffer.byteLength(data);
      if (!slab || !this.fits(slab, exact)) slab = this.newSlab(exact);
    }
    const at = this.openRecord(slab);
    return this.closeRecord(slab, at, slab.buf.write(data, at + RECORD_HEADER_BYTES));
  }

  /**
   * Appends one event given as the UTF-8 bytes of its JSON, `bytes` from `start` to `end` (an
   * agent's line, copied as it is); returns its seq. A typed-array copy: writing the line as a byte
   * string (`Buffer#write(…, "latin1")`, a call into C++ with its argument checks) took ~40 ns more.
   */
  appendBytes(bytes: Uint8Array, start: number, end: number): number {
    const length = end - start;
    let slab = this.slabs.at(-1);
    if (!slab || !this.fits(slab, length)) slab = this.newSlab(length);
    const at = this.openRecord(slab);
    slab.buf.set(bytes.subarray(start, end), at + RECORD_HEADER_BYTES);
    return this.closeRecord(slab, at, length);
  }

  /** Where the next record of `slab` starts: after a frame header when no frame is being filled. */
  private openRecord(slab: Slab): number {
    if (slab.frameStart === -1) {
      slab.frameStart = slab.used;
      slab.frameCount = 0;
      slab.used += FRAME_HEADER_BYTES;
      this.usedBytes += FRAME_HEADER_BYTES;
    }
    return slab.used;
  }

  /** The record at `at` holds `length` bytes of data: its header, offset and the window's sizes. */
  private closeRecord(slab: Slab, at: number, length: number): number {
    slab.buf.writeUInt32LE(length, at);
    if (slab.count === slab.offsets.length) slab.offsets = grow(slab.offsets);
    slab.offsets[slab.count++] = at;
    slab.frameCount++;
    slab.used = at + RECORD_HEADER_BYTES + length;
    this.usedBytes += RECORD_HEADER_BYTES + length;
    return this.next++;
  }

  /**
   * Seals the frame being filled and returns every sealed frame not taken yet, oldest first;
   * undefined when there is none. They stay untaken (and in the window) until `markTaken`, so a
   * write that failed is retried with the same bytes. A range of each slab that has some, in an
   * object this window reuses (valid until the next call), so a commit allocates nothing here.
   */
  sealed(timeMs: number): FrameRanges | undefined {
    const ranges = this.ranges;
    let n = 0;
    for (let i = 0; i < this.slabs.length; i++) {
      const slab = this.slabs[i]!;
      this.seal(slab, timeMs);
      if (slab.taken === slab.used) continue;
      if (n === ranges.bufs.length) growRanges(ranges);
      ranges.bufs[n] = slab.buf;
      ranges.starts[n] = slab.taken;
      ranges.ends[n] = slab.used;
      n++;
    }
    ranges.count = n;
    return n === 0 ? undefined : ranges;
  }

  /**
   * The frames `sealed` returned were written. Their buffers are let go of here, on every commit:
   * kept in the reused ranges, a slab `trim` has released since (one that is not `spare`) stayed
   * alive until a later commit spanned as many slabs again.
   */
  markTaken(): void {
    for (const slab of this.slabs) slab.taken = slab.used;
    const ranges = this.ranges;
    for (let i = 0; i < ranges.count; i++) ranges.bufs[i] = EMPTY;
  }

  /**
   * Events after `cursor` (up to `last`), about `maxBytes` of them (at least one), as views of the
   * slabs; undefined if `cursor + 1` is older than the window.
   */
  read(cursor: number, maxBytes: number, last = this.next - 1): EventBatch | undefined {
    const first = cursor + 1;
    if (first < this.first) return undefined;
    const batch = emptyBatch(first);
    const end = Math.min(last + 1, this.next);
    // Each event's slab looked up (the newest first, where it almost always is), not a loop per
    // slab: a batch that crossed into the next slab ran the outer loop's test a second time, code
    // TurboFan's `read` had no type feedback for, and deoptimised there (4 of 10 fresh servers).
    for (let seq = first; seq < end && (seq === first || batch.bytes < maxBytes); seq++) {
      const { buf, offsets, firstSeq } = this.slabOf(seq)!;
      const at = offsets[seq - firstSeq]! + RECORD_HEADER_BYTES;
      pushEvent(batch, buf, at, at + buf.readUInt32LE(at - RECORD_HEADER_BYTES));
    }
    return batch;
  }

  /**
   * Events after `seq` are owed to a reader: `trim` keeps them whatever the limits (the producer
   * is paused while they exceed its bound, so this holds no more than the backpressure allows).
   * Those the reader just got are trimmed now, as they would have been when appended.
   */
  hold(seq: number): void {
    const moved = seq > this.held;
    this.held = seq;
    if (moved) this.trim();
  }

  private fits(slab: Slab, dataBytes: number): boolean {
    const frame = slab.frameStart === -1 ? FRAME_HEADER_BYTES : 0;
    return slab.used + frame + RECORD_HEADER_BYTES + dataBytes <= slab.buf.length;
  }

  private newSlab(dataBytes: number): Slab {
    const last = this.slabs.at(-1);
    if (last) this.seal(last, Date.now());
    const needed = FRAME_HEADER_BYTES + RECORD_HEADER_BYTES + dataBytes;
    const size = Math.max(this.nextSlabBytes, needed);
    this.nextSlabBytes = Math.min(this.nextSlabBytes * 2, MAX_SLAB_BYTES);
    const spare = this.spare;
    this.spare = undefined;
    const slab: Slab = {
      buf: spare !== undefined && spare.length >= size ? spare : Buffer.allocUnsafeSlow(size),
      used: 0,
      firstSeq: this.next,
      count: 0,
      offsets: new Uint32Array(64),
      frameStart: -1,
      frameCount: 0,
      taken: 0,
    };
    this.slabs.push(slab);
    return slab;
  }

  private seal(slab: Slab, timeMs: number): void {
    if (slab.frameStart === -1) return;
    if (this.sealFrames) sealFrame(slab.buf, slab.frameStart, slab.used, slab.frameCount, timeMs);
    slab.frameStart = -1;
  }

  private slabOf(seq: number): Slab | undefined {
    // The decrement in the test, where each call runs it: in the update, it ran only for an event
    // in an older slab, first after TurboFan had compiled `read` (which inlines this), which then
    // deoptimised there for want of type feedback (2 of 11 fresh servers' first 500 echo turns).
    for (let i = this.slabs.length; i-- > 0;) {
      const slab = this.slabs[i]!;
      if (seq >= slab.firstSeq) return seq < slab.firstSeq + slab.count ? slab : undefined;
    }
    return undefined;
  }

  /**
   * Drops the oldest events past the limits (bytes count their framing); the newest event always
   * stays, and so does any event the segment writer has not taken yet (a window backed by a file
   * never loses unwritten bytes). Called once per commit rather than per append: the events to
   * drop are found from the offsets, a slab at a time, without reading each one.
   */
  trim(): void {
    while (this.next - this.first > 1) {
      const slab = this.slabs[0]!;
      const end = Math.min(slab.firstSeq + slab.count, this.next - 1);
      const to = this.keptFrom(slab, end);
      if (to <= this.first) return;
      this.first = to;
      if (to < slab.firstSeq + slab.count || slab === this.slabs.at(-1)) return;
      // Its last event is gone (and was taken, so all of it was): the slab is released.
      this.slabs.shift();
      this.usedBytes -= slab.used;
      if (slab.buf.length === MAX_SLAB_BYTES) this.spare = slab.buf;
    }
  }

  /** The oldest seq (≤ `end`) of `slab`, the oldest slab, that the limits let the window keep. */
  private keptFrom(slab: Slab, end: number): number {
    const { maxEvents, maxBytes } = this.limits;
    const at = (seq: number) => slab.offsets[seq - slab.firstSeq]!;
    const limit = Math.min(end, this.held + 1);
    let to = Math.min(limit, Math.max(this.first, this.next - maxEvents));
    while (to < limit && this.usedBytes - at(to) > maxBytes) to++;
    if (this.sealFrames) while (to > this.first && at(to - 1) >= slab.taken) to--;
    return to;
  }
}

/** Room for more slabs' ranges than `frameRanges` made (frames unwritten in more than four slabs). */
function growRanges(ranges: FrameRanges): void {
  for (let i = ranges.bufs.length; i > 0; i--) {
    ranges.bufs.push(EMPTY);
    ranges.starts.push(0);
    ranges.ends.push(0);
  }
}

function grow(offsets: Uint32Array): Uint32Array {
  const bigger = new Uint32Array(offsets.length * 2);
  bigger.set(offsets);
  return bigger;
}
