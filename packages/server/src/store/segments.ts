import fs from "node:fs";
import path from "node:path";
import { batchLength, emptyBatch, pushEvent, type EventBatch } from "./event-batch.js";
import type { FrameRanges } from "./byte-window.js";
import { closeQuietly, removeDir, removeFile, writeRange } from "./file-io.js";
import {
  FRAME_HEADER_BYTES,
  readFrame,
  RECORD_HEADER_BYTES,
  readSegmentHeader,
  SEGMENT_HEADER_BYTES,
  segmentHeader,
  type FrameInfo,
} from "./frames.js";

export interface SegmentLimits {
  /** A segment file is closed and a new one started past this size. */
  segmentBytes: number;
  /** Older segments are deleted while the newer ones hold at least this many bytes… */
  retentionBytes: number;
  /** …or when everything in them is older than this. */
  retentionMs: number;
}

/** A segment that cannot be read: a frame in the middle of it fails its checksum. */
export class CorruptLogError extends Error {
  constructor(
    readonly file: string,
    readonly offset: number,
    readonly throughSeq: number,
  ) {
    super(`event log segment ${file} is corrupt at byte ${offset}`);
  }
}

/** What opening a log found wrong and repaired, to be reported. */
export interface Repair {
  file: string;
  /** Bytes dropped from the end of the last segment (a torn write), or undefined. */
  droppedBytes: number;
  reason: string;
}

/**
 * Where a log's last segment stood when it was known to be whole (written, and synced with
 * `fsync`): recovery trusts the bytes before `bytes` and reads only what follows, so that opening
 * a log costs the same whatever its size. Kept in the index at each checkpoint and at shutdown.
 */
export interface TailMark {
  /** The segment's first seq (a mark of a segment since rotated out is ignored). */
  first: number;
  bytes: number;
  /** The seq after the last event in those bytes. */
  next: number;
  newestMs: number;
}

interface Segment {
  firstSeq: number;
  file: string;
  bytes: number;
  /** Time of the newest frame (the file's mtime for segments of an earlier run). */
  newestMs: number;
  /** Built on the first read for segments of an earlier run (the last one too, when a mark let recovery skip it). */
  index: SparseIndex | undefined;
}

/** Distance between two entries of a segment's sparse index: a read starts at most this far before its event. */
const INDEX_STRIDE = 64 * 1024;
/** Smallest read from a segment. */
const READ_CHUNK = 256 * 1024;

/**
 * A segment's frame starts every `INDEX_STRIDE` bytes or so, as flat `[seq, offset, seq, offset…]`
 * pairs; the first is always the segment's first frame. Sized for a whole segment up front, plus one
 * spare pair: `note` (each write) stores the write's start in the spare pair and keeps it when it is
 * `INDEX_STRIDE` past the last one kept, so that a write runs the same stores every time. With a
 * `push` that ran only when a write crossed a stride, its first run was the segment's first write,
 * before V8 records type feedback for `write`, and TurboFan's code for `write` deoptimised at the
 * next push, 64 KiB into the log (9 of 11 fresh servers' first 500 echo turns).
 */
class SparseIndex {
  entries: Float64Array;
  /** Pairs kept. */
  count = 1;

  /** The index of a segment that starts at `firstSeq` and is to hold up to `bytes`. */
  constructor(firstSeq: number, bytes: number) {
    this.entries = new Float64Array(2 * (Math.floor(bytes / INDEX_STRIDE) + 2));
    this.entries[0] = firstSeq;
    this.entries[1] = SEGMENT_HEADER_BYTES;
  }

  /** A write of frames starting with seq `seq` at `offset`, after the last pair's. */
  note(seq: number, offset: number): void {
    const at = 2 * this.count;
    if (at + 2 > this.entries.length) this.grow();
    const entries = this.entries;
    entries[at] = seq;
    entries[at + 1] = offset;
    this.count += offset - entries[at - 1]! >= INDEX_STRIDE ? 1 : 0;
  }

  /** The frame start at or before `seq`: `[its first seq, its offset]`. */
  seek(seq: number): [number, number] {
    const entries = this.entries;
    let best = 0;
    for (let i = 2; i < 2 * this.count; i += 2) {
      if (entries[i]! > seq) break;
      best = i;
    }
    return [entries[best]!, entries[best + 1]!];
  }

  /** Past the size given to the constructor (a segment of an earlier run written with larger segments). */
  private grow(): void {
    const entries = new Float64Array(2 * this.entries.length);
    entries.set(this.entries);
    this.entries = entries;
  }
}

const nameOf = (firstSeq: number) => `${String(firstSeq).padStart(16, "0")}.log`;
const SEGMENT_NAME = /^(\d{16})\.log$/;

/**
 * One connection's events on disk: segment files named by their first sequence number, the last
 * one open for appending. Appends are `write`s of frames already encoded in memory (the page
 * cache is enough to survive a killed process); `fds()` names what a group commit must
 * `fdatasync` to survive a power loss too.
 */
export class SegmentFiles {
  private fd: number;
  /** Descriptors of segments rotated out and not yet synced (with `fsync` on). */
  private retired: number[] = [];
  private dirCreated = true;
  private constructor(
    readonly dir: string,
    private readonly segments: Segment[],
    fd: number,
    private next: number,
    private readonly limits: SegmentLimits,
    private readonly keepForSync: boolean,
  ) {
    this.fd = fd;
  }

  /** A new log whose first event gets `firstSeq`. Throws the filesystem's error (ENOSPC…). */
  static create(dir: string, firstSeq: number, limits: SegmentLimits, fsync: boolean): SegmentFiles {
    fs.mkdirSync(dir, { recursive: true });
    const segment = newSegment(dir, firstSeq, limits.segmentBytes);
    return new SegmentFiles(dir, [segment.segment], segment.fd, firstSeq, limits, fsync);
  }

  /**
   * The log in `dir` as an earlier run left it: older segments are taken as they are (read and
   * checked on first use); the last one is read from `mark` on (from its start without a mark that
   * fits it), and a torn or corrupt tail (a write cut short by a crash or power loss) is cut off and
   * reported. Undefined when no segment is left.
   */
  static open(
    dir: string,
    limits: SegmentLimits,
    fsync: boolean,
    mark?: TailMark,
  ): { files: SegmentFiles; repair: Repair | undefined } | undefined {
    let names: string[];
    try {
      names = fs
        .readdirSync(dir)
        .filter((n) => SEGMENT_NAME.test(n))
        .sort();
    } catch {
      return undefined;
    }
    if (names.length === 0) return undefined;
    const segments: Segment[] = names.map((name) => {
      const file = path.join(dir, name);
      const stat = fs.statSync(file);
      return {
        firstSeq: Number(name.slice(0, 16)),
        file,
        bytes: stat.size,
        newestMs: stat.mtimeMs,
        index: undefined,
      };
    });
    const tail = segments.at(-1)!;
    const fits =
      mark !== undefined &&
      mark.first === tail.firstSeq &&
      mark.bytes >= SEGMENT_HEADER_BYTES &&
      mark.bytes <= tail.bytes &&
      mark.next >= tail.firstSeq;
    const { next, repair } = scanTail(tail, fits ? mark : undefined, limits.segmentBytes);
    const fd = fs.openSync(tail.file, "a");
    const files = new SegmentFiles(dir, segments, fd, next, limits, fsync);
    files.dirCreated = false;
    return { files, repair };
  }

  /** The seq the next written event gets. */
  get nextSeq(): number {
    return this.next;
  }

  /** The oldest seq still on disk. */
  get oldestSeq(): number {
    return this.segments[0]!.firstSeq;
  }

  /** Where the last segment stands now. */
  tail(): TailMark {
    const last = this.segments.at(-1)!;
    return { first: last.firstSeq, bytes: last.bytes, next: this.next, newestMs: last.newestMs };
  }

  /** Total bytes of the segments. */
  get bytes(): number {
    return this.segments.reduce((sum, s) => sum + s.bytes, 0);
  }

  /**
   * Appends frames holding `count` events. On failure (ENOSPC, EIO…) the file is cut back to where
   * it was, so what was written before stays intact, and the error is thrown.
   */
  write(frames: FrameRanges, count: number, timeMs: number): void {
    const { bufs, starts, ends } = frames;
    let bytes = 0;
    for (let i = 0; i < frames.count; i++) bytes += ends[i]! - starts[i]!;
    let segment = this.segments.at(-1)!;
    if (segment.bytes > SEGMENT_HEADER_BYTES && segment.bytes + bytes > this.limits.segmentBytes)
      segment = this.rotate();
    const offset = segment.bytes;
    try {
      // A write per slab (almost always one): frames across slabs are rare enough for no `writev`.
      for (let i = 0; i < frames.count; i++)
        writeRange(this.fd, bufs[i]!, starts[i]!, ends[i]!, "the event log");
    } catch (error) {
      lastRead.forget();
      try {
        fs.ftruncateSync(this.fd, offset);
      } catch {
        // Nothing more to do: the next open cuts an invalid tail anyway.
      }
      throw error;
    }
    // No index yet (a recovered segment whose first read builds it, these frames included).
    segment.index?.note(this.next, offset);
    segment.bytes += bytes;
    segment.newestMs = timeMs;
    this.next += count;
  }

  /**
   * Events after `cursor` up to seq `last`, about `maxBytes` of them, read from the segments;
   * undefined when `cursor + 1` is not on disk. Throws `CorruptLogError` for a frame that fails
   * its checksum.
   */
  read(cursor: number, maxBytes: number, last: number): EventBatch | undefined {
    const first = cursor + 1;
    const at = this.segmentIndexOf(first);
    if (at === -1 || first > last) return undefined;
    const segment = this.segments[at]!;
    const end = at + 1 < this.segments.length ? this.segments[at + 1]!.firstSeq : this.next;
    let [seq, offset] = this.seek(segment, first);
    const batch = emptyBatch(first);
    let { buf, start: bufStart } = lastRead.cached(segment.file, offset);
    while (seq < end && seq <= last && (batchLength(batch) === 0 || batch.bytes < maxBytes)) {
      let frame = readFrame(buf, offset - bufStart);
      if (frame === "incomplete") {
        // A new read may reuse the buffer the batch's events are in: they go out first.
        if (batchLength(batch) > 0) break;
        bufStart = offset;
        buf = lastRead.read(segment.file, offset, Math.max(READ_CHUNK, maxBytes + FRAME_HEADER_BYTES));
        frame = readFrame(buf, 0);
        if (frame === "incomplete") {
          const header = readFrameSize(buf);
          // A damaged header may promise more bytes than the file holds: read no further than its end.
          if (header !== undefined && offset + header <= segment.bytes) {
            buf = readAt(segment.file, offset, header);
            frame = readFrame(buf, 0);
          }
        }
      }
      if (typeof frame === "string") throw new CorruptLogError(segment.file, offset, end - 1);
      if (seq + frame.count > first) {
        let at = offset - bufStart + FRAME_HEADER_BYTES;
        for (let i = 0; i < frame.count && seq + i <= last; i++) {
          const length = buf.readUInt32LE(at);
          at += RECORD_HEADER_BYTES;
          if (seq + i >= first) {
            if (batchLength(batch) > 0 && batch.bytes >= maxBytes) break;
            pushEvent(batch, buf, at, at + length);
          }
          at += length;
        }
      }
      seq += frame.count;
      offset += frame.bytes;
    }
    return batchLength(batch) === 0 ? undefined : batch;
  }

  /**
   * Deletes the oldest segments past the retention limits (never the one being written); returns
   * the first seq kept. By bytes, a segment goes only when the newer ones still hold
   * `retentionBytes`: the newest `retentionBytes` of events always stay readable, so the disk holds
   * up to about two segments more (the oldest, and the one being written). Deleting while the total
   * is over the limit could leave almost nothing: a busy writer's batch may fill a segment past
   * `segmentBytes` on its own, and a reader a few events behind would get 410.
   */
  retain(now: number): number {
    const { retentionBytes, retentionMs } = this.limits;
    let total = this.bytes;
    while (this.segments.length > 1) {
      const oldest = this.segments[0]!;
      if (total - oldest.bytes < retentionBytes && oldest.newestMs >= now - retentionMs) break;
      removeFile(oldest.file);
      total -= oldest.bytes;
      this.segments.shift();
    }
    return this.oldestSeq;
  }

  /**
   * Drops every segment that ends at or before `seq` (after a corrupt one was found); returns the
   * first seq kept. When that is the segment being written, a new one is started first, so that
   * the numbering goes on after the events dropped and nothing is renumbered.
   */
  dropThrough(seq: number): number {
    if (seq + 1 >= this.next && this.segments.at(-1)!.firstSeq <= seq) this.rotate();
    while (this.segments.length > 1 && this.segments[1]!.firstSeq <= seq + 1) {
      removeFile(this.segments[0]!.file);
      this.segments.shift();
    }
    return this.oldestSeq;
  }

  /** Descriptors holding writes not yet synced, and whether a new file's directory entry needs syncing too. */
  syncTargets(): { fds: number[]; dir: boolean } {
    const targets = { fds: [...this.retired, this.fd], dir: this.dirCreated };
    this.dirCreated = false;
    return targets;
  }

  /** Closes segments rotated out once a sync covered them. */
  closeRetired(fds: number[]): void {
    for (const fd of fds) {
      if (fd === this.fd) continue;
      this.retired = this.retired.filter((r) => r !== fd);
      closeQuietly(fd);
    }
  }

  /** Closes the open segment (the files stay). */
  close(): void {
    for (const fd of [...this.retired, this.fd]) closeQuietly(fd);
    this.retired = [];
  }

  /** Deletes the whole log. */
  remove(): void {
    this.close();
    removeDir(this.dir);
  }

  private rotate(): Segment {
    if (this.keepForSync) this.retired.push(this.fd);
    else closeQuietly(this.fd);
    const { segment, fd } = newSegment(this.dir, this.next, this.limits.segmentBytes);
    this.fd = fd;
    this.dirCreated = true;
    this.segments.push(segment);
    this.retain(Date.now());
    return segment;
  }

  private segmentIndexOf(seq: number): number {
    for (let i = this.segments.length - 1; i >= 0; i--)
      if (this.segments[i]!.firstSeq <= seq) return seq < this.next ? i : -1;
    return -1;
  }

  /** The frame start at or before `seq` that the sparse index knows: `[its first seq, its offset]`. */
  private seek(segment: Segment, seq: number): [number, number] {
    segment.index ??= buildIndex(segment, this.limits.segmentBytes);
    return segment.index.seek(seq);
  }
}

function newSegment(dir: string, firstSeq: number, segmentBytes: number): { segment: Segment; fd: number } {
  const file = path.join(dir, nameOf(firstSeq));
  const fd = fs.openSync(file, "wx");
  try {
    const header = segmentHeader(firstSeq);
    writeRange(fd, header, 0, header.length, "the event log");
  } catch (error) {
    closeQuietly(fd);
    removeFile(file);
    throw error;
  }
  const index = new SparseIndex(firstSeq, segmentBytes);
  const segment = { firstSeq, file, bytes: SEGMENT_HEADER_BYTES, newestMs: Date.now(), index };
  return { segment, fd };
}

/**
 * Reads the last segment from `mark` on (through, without one): the seq after its last event and
 * where its valid frames end, and its sparse index when read from the start. What follows the last
 * valid frame (a frame cut short by a crash, or bytes that are no frame) is cut off, so that the
 * next write starts right after it.
 */
function scanTail(
  segment: Segment,
  mark: TailMark | undefined,
  segmentBytes: number,
): { next: number; repair: Repair | undefined } {
  const from = mark?.bytes ?? 0;
  if (mark && from === segment.bytes) {
    // Nothing was written after the mark (a clean stop): nothing to read.
    segment.index = undefined;
    segment.newestMs = mark.newestMs;
    return { next: mark.next, repair: undefined };
  }
  const buf = mark ? readAt(segment.file, from, segment.bytes - from) : fs.readFileSync(segment.file);
  let reason: string | undefined;
  if (!mark && readSegmentHeader(buf) !== segment.firstSeq) {
    reason = "the segment header is missing or does not match the file name";
    fs.writeFileSync(segment.file, segmentHeader(segment.firstSeq));
    segment.bytes = SEGMENT_HEADER_BYTES;
    segment.index = new SparseIndex(segment.firstSeq, segmentBytes);
    return { next: segment.firstSeq, repair: { file: segment.file, droppedBytes: buf.length, reason } };
  }
  const index = mark ? undefined : new SparseIndex(segment.firstSeq, Math.max(buf.length, segmentBytes));
  segment.index = index;
  if (mark) segment.newestMs = mark.newestMs;
  let seq = mark?.next ?? segment.firstSeq;
  let offset = mark ? 0 : SEGMENT_HEADER_BYTES;
  for (;;) {
    const frame: FrameInfo | "incomplete" | "invalid" = readFrame(buf, offset);
    if (typeof frame === "string") {
      if (offset < buf.length)
        reason =
          frame === "incomplete" ? "a frame cut short (a torn write)" : "bytes that are not a valid frame";
      break;
    }
    index?.note(seq, offset);
    seq += frame.count;
    offset += frame.bytes;
    segment.newestMs = frame.timeMs;
  }
  if (reason === undefined) return { next: seq, repair: undefined };
  fs.truncateSync(segment.file, from + offset);
  segment.bytes = from + offset;
  return { next: seq, repair: { file: segment.file, droppedBytes: buf.length - offset, reason } };
}

/** The sparse index of a segment of an earlier run, from a read of the whole file. */
function buildIndex(segment: Segment, segmentBytes: number): SparseIndex {
  const buf = fs.readFileSync(segment.file);
  const index = new SparseIndex(segment.firstSeq, Math.max(buf.length, segmentBytes));
  let seq = segment.firstSeq;
  let offset = SEGMENT_HEADER_BYTES;
  while (offset < buf.length) {
    const frame = readFrame(buf, offset);
    if (typeof frame === "string") break; // the read that reaches it reports it
    index.note(seq, offset);
    seq += frame.count;
    offset += frame.bytes;
  }
  return index;
}

/** The whole size of the frame whose header starts `buf`, if the header is there. */
function readFrameSize(buf: Buffer): number | undefined {
  return buf.length >= FRAME_HEADER_BYTES ? FRAME_HEADER_BYTES + buf.readUInt32LE(8) : undefined;
}

function readAt(file: string, offset: number, length: number, into?: Buffer): Buffer {
  const fd = fs.openSync(file, "r");
  try {
    const buf = into ?? Buffer.allocUnsafe(length);
    const n = fs.readSync(fd, buf, 0, length, offset);
    return buf.subarray(0, n);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The last chunk read from a segment, in one buffer of `READ_CHUNK` the process reuses. A reader
 * replaying from disk asks for `WRITE_BATCH_BYTES`-sized batches: its next read starts inside the
 * chunk the previous one read, so it is served from here instead of the file; and a replay no
 * longer leaves a 256 KiB buffer behind per read, garbage off the JS heap that only a full
 * collection frees (a 200 MB replay grew RSS by ~30 MB, kept as malloc's free memory). Shared by
 * every log: reads are synchronous, and a batch is consumed before the next read (`EventBatch`).
 */
class ReadCache {
  private buf: Buffer | undefined;
  private file = "";
  private start = 0;
  private view: Buffer = Buffer.alloc(0);

  /** The cached bytes of `file` around `offset`, if any, else an empty buffer at `offset`. */
  cached(file: string, offset: number): { buf: Buffer; start: number } {
    if (file === this.file && offset >= this.start && offset < this.start + this.view.length)
      return { buf: this.view, start: this.start };
    return { buf: Buffer.alloc(0), start: offset };
  }

  /** Reads `length` bytes of `file` from `offset`, into the shared buffer when they fit. */
  read(file: string, offset: number, length: number): Buffer {
    if (length > READ_CHUNK) return readAt(file, offset, length);
    this.buf ??= Buffer.allocUnsafeSlow(READ_CHUNK);
    this.forget();
    this.view = readAt(file, offset, length, this.buf);
    this.file = file;
    this.start = offset;
    return this.view;
  }

  /** The files may have changed under the cached bytes (a failed write was cut back). */
  forget(): void {
    this.file = "";
    this.view = Buffer.alloc(0);
  }
}

const lastRead = new ReadCache();
