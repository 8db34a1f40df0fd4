import fs from "node:fs";
import path from "node:path";
import { closeQuietly, removeFile, syncDirectorySync, writeRange } from "./file-io.js";

/** A client request's id as JSON-RPC has it: kept apart by type (`1` is not `"1"`). */
export type RequestId = string | number;

/** A request in flight: its id, and the seq the connection's next event had when it was recorded. */
export interface OpenRequest {
  id: RequestId;
  /** Its answer can only be an event from this seq on. */
  since: number;
}

const FILE = "requests.journal";
/** How a short write names the file. */
const JOURNAL_NAME = "the request journal";
const NEWLINE = 0x0a;
const PLUS = 0x2b;
const MINUS = 0x2d;
const EQUALS = 0x3d;
/** Where a line is encoded for its write; one that might not fit (> SCRATCH_CHARS) gets a buffer of its own. */
const scratch = Buffer.allocUnsafe(4096);
/** Characters that always fit in `scratch`: at most 3 bytes each in UTF-8 (a pair of surrogates is 4 for 2). */
const SCRATCH_CHARS = Math.floor(scratch.length / 3);
/** Past this size the journal is rewritten with only the requests still open (at a checkpoint). */
const COMPACT_BYTES = 64 * 1024;

/**
 * The client requests of one connection that a restart must answer, in `requests.journal` beside
 * its segments. A request accepted is one line, `+<seq> <id JSON>`, written before it runs and
 * before the client is told so (`seq` is the log's next event then: its answer can only come from
 * there on): one `write` of a few bytes to the page cache (~2–5 µs), where the index's connection
 * record (a JSON line of the whole record, and a snapshot with `fdatasync` every few thousand) was
 * too costly to write per request.
 *
 * An answer writes nothing here: its event in the log says the request was answered, and
 * recovery reads it there (`DiskStore.openLog`: the events from the oldest open line's `seq` on).
 * In memory a request leaves the open set once its answer is durable (`remove`), and at each
 * checkpoint (about a second) the file is brought back to the open set, so recovery reads about
 * a second of events at most and the file holds about a second of requests:
 * - nothing open: the file is cut to nothing (one `ftruncate`, for an echo-like connection);
 * - some open (a long prompt, or a turn in flight): one line `=[[seq,id],…]` says "these are the
 *   open requests, and none is answered before its seq", each seq moved up to the event after the
 *   durable ones (an open request's answer is not among them), and the file is cut to nothing the
 *   next time no request is open (`remove`); past `COMPACT_BYTES` (a client that always has a
 *   request in flight) it is rewritten with those alone instead (a temporary file renamed over it).
 * Every one of these may be lost (a power loss before a sync) without harm: the older lines it
 * replaced name requests whose answers are durable in the log, where recovery finds them. Opening
 * replays the lines (a last line cut short by a crash is ignored; `-<id JSON>`, "answered", is
 * still read from journals of earlier servers).
 */
export class RequestJournal {
  private fd: number | undefined;
  private bytes: number;
  /** Open requests by their id's JSON text. */
  private readonly open = new Map<string, OpenRequest>();
  /**
   * The file may not match `open` (a `-` line could not be written, or a write was cut and could
   * not be cut back): it is rewritten before the next `+`, and at each checkpoint until it is.
   */
  private stale: Error | undefined;
  /** Set when a line was written since the last `takeUnsynced`. */
  private unsynced = false;
  /** Set when the file names a request no longer open (answered): the next checkpoint compacts it. */
  private settled = false;
  /** Set by a checkpoint that found requests open: the file is cut to nothing once none is. */
  private truncateWhenEmpty = false;

  private constructor(
    private readonly file: string,
    private readonly fsync: boolean,
    bytes: number,
  ) {
    this.bytes = bytes;
  }

  /** An empty journal in `dir`; the file is created by the first request. */
  static create(dir: string, fsync: boolean): RequestJournal {
    return new RequestJournal(path.join(dir, FILE), fsync, 0);
  }

  /** The journal an earlier run left in `dir` (none: empty), with the requests it left open. */
  static open(dir: string, fsync: boolean): RequestJournal {
    const file = path.join(dir, FILE);
    let buf: Buffer;
    try {
      buf = fs.readFileSync(file);
    } catch {
      return new RequestJournal(file, fsync, 0);
    }
    const journal = new RequestJournal(file, fsync, buf.length);
    let good = 0;
    for (let start = 0; start < buf.length;) {
      const end = buf.indexOf(NEWLINE, start);
      if (end === -1) break; // a line cut short by a crash: that write never completed
      const line = buf.toString("utf8", start + 1, end);
      if (buf[start] === PLUS) {
        const space = line.indexOf(" ");
        const key = line.slice(space + 1);
        journal.open.set(key, { id: parseId(key), since: Number(line.slice(0, space)) || 1 });
      } else if (buf[start] === MINUS) journal.open.delete(line);
      else if (buf[start] === EQUALS) journal.replaceOpen(line);
      good = start = end + 1;
    }
    if (good < buf.length) {
      fs.truncateSync(file, good);
      journal.bytes = good;
    }
    // Lines of requests answered since: the first checkpoint compacts them.
    journal.settled = journal.bytes > 0;
    return journal;
  }

  /** The requests left open (accepted and not answered), oldest first. */
  requests(): OpenRequest[] {
    return [...this.open.values()];
  }

  /** The seq from which the open requests' answers are to be found in the log (none open: undefined). */
  oldestSince(): number | undefined {
    let oldest: number | undefined;
    for (const { since } of this.open.values()) if (oldest === undefined || since < oldest) oldest = since;
    return oldest;
  }

  get size(): number {
    return this.open.size;
  }

  /**
   * Records request `id` as open; returns why it could not be written (ENOSPC…), in which case it
   * is not recorded and must not run.
   */
  add(id: RequestId, since: number): Error | undefined {
    const key = JSON.stringify(id);
    if (this.stale !== undefined && !this.rewrite()) return this.stale;
    const failure = this.append(`+${since} ${key}\n`);
    if (failure === undefined) this.open.set(key, { id, since });
    return failure;
  }

  /**
   * Request `id` was answered, and its answer is durable in the event log: it is no longer open.
   * Nothing is written (the answer in the log says it); the next checkpoint compacts its line away.
   */
  remove(id: RequestId): void {
    if (!this.open.delete(JSON.stringify(id))) return;
    this.settled = true;
    if (this.open.size === 0 && this.truncateWhenEmpty) this.truncate();
  }

  /**
   * At a checkpoint, `durable` the log's newest durable seq: brings the file back to the open
   * requests when it names answered ones, or when an open one's answer would be looked for among
   * durable events (each open request's seq moves past them: its answer is not there).
   */
  checkpoint(durable: number): void {
    let behind = false;
    for (const request of this.open.values())
      if (request.since <= durable) {
        request.since = durable + 1;
        behind = true;
      }
    if (this.stale !== undefined) this.rewrite();
    else if (this.open.size === 0) {
      if (this.bytes > 0) this.truncate();
    } else if (this.bytes > COMPACT_BYTES) this.rewrite();
    else if (this.settled || behind) {
      const open = [...this.open.values()].map(({ id, since }) => [since, id]);
      if (this.append(`=${JSON.stringify(open)}\n`) === undefined) this.settled = false;
      this.truncateWhenEmpty = true;
    }
  }

  /** The descriptor if it was written since the last call (for a group commit's `fdatasync`). */
  takeUnsynced(): number | undefined {
    if (!this.unsynced) return undefined;
    this.unsynced = false;
    return this.fd;
  }

  close(): void {
    if (this.fd !== undefined) closeQuietly(this.fd);
    this.fd = undefined;
  }

  /** Appends `line` whole, or leaves the file as it was and returns why not. */
  private append(line: string): Error | undefined {
    const start = this.bytes;
    try {
      this.fd ??= fs.openSync(this.file, "a");
      // A `+` line is written before every request's 202: encoded into one buffer kept for it, not
      // a new one per line (bench/README.md, "The request path past the router").
      const bytes = line.length <= SCRATCH_CHARS ? scratch : Buffer.from(line);
      const length = bytes === scratch ? scratch.write(line) : bytes.length;
      writeRange(this.fd, bytes, 0, length, JOURNAL_NAME);
      this.bytes += length;
      this.unsynced = true;
      return undefined;
    } catch (error) {
      if (this.fd !== undefined) {
        try {
          fs.ftruncateSync(this.fd, start);
          this.bytes = start;
        } catch {
          // A torn line may be left: the file no longer matches until rewritten.
          this.stale = error as Error;
        }
      }
      return error as Error;
    }
  }

  /** Replays a `=` line: the open requests are those it names, from the seqs it gives. */
  private replaceOpen(line: string): void {
    let open: unknown;
    try {
      open = JSON.parse(line);
    } catch {
      return; // not a line of ours: the file is as if it were not there
    }
    if (!Array.isArray(open)) return;
    this.open.clear();
    for (const entry of open as Array<[number, RequestId]>)
      this.open.set(JSON.stringify(entry[1]), { id: entry[1], since: entry[0] });
  }

  /** Cuts the file to nothing (no request open); a failure leaves it as it was, to retry. */
  private truncate(): void {
    try {
      this.fd ??= fs.openSync(this.file, "a");
      fs.ftruncateSync(this.fd, 0);
      this.bytes = 0;
      this.settled = this.truncateWhenEmpty = false;
    } catch {
      // The lines left name answered requests: recovery finds their answers in the log.
    }
  }

  /** Writes the open requests to a new file renamed over the journal; returns whether it could. */
  private rewrite(): boolean {
    const tmp = `${this.file}.tmp`;
    let text = "";
    for (const [key, { since }] of this.open) text += `+${since} ${key}\n`;
    const bytes = Buffer.from(text);
    let fd: number | undefined;
    try {
      fd = fs.openSync(tmp, "w");
      writeRange(fd, bytes, 0, bytes.length, JOURNAL_NAME);
      if (this.fsync) fs.fdatasyncSync(fd);
      fs.renameSync(tmp, this.file);
      // With fsync, lines appended after the rewrite are synced into the new file: its name must last.
      if (this.fsync) syncDirectorySync(path.dirname(this.file));
    } catch (error) {
      if (fd !== undefined) closeQuietly(fd);
      removeFile(tmp);
      this.stale ??= error as Error;
      return false;
    }
    this.close();
    this.fd = fd;
    this.bytes = bytes.length;
    this.stale = undefined;
    this.settled = false;
    this.unsynced = false;
    return true;
  }
}

/** An id as a line holds it (a line that is no JSON, which no write of ours makes, is kept as text). */
function parseId(key: string): RequestId {
  try {
    const id: unknown = JSON.parse(key);
    if (typeof id === "string" || typeof id === "number") return id;
  } catch {
    // Not JSON: kept as the text it is.
  }
  return key;
}
