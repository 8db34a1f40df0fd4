import fs from "node:fs";
import path from "node:path";
import { closeQuietly, writeAll } from "./file-io.js";

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
/** Past this size the journal is rewritten with only the requests still open (at a checkpoint). */
const COMPACT_BYTES = 64 * 1024;

/**
 * The client requests of one connection that a restart must answer, in `requests.journal` beside
 * its segments: one line per change, `+<seq> <id JSON>` when a request is accepted (before it runs
 * and before the client is told so; `seq` is the log's next event then), `-<id JSON>` once its
 * answer is in the event log. Each is one
 * `write` of a few bytes to the page cache (~2–5 µs), so every request is recorded before its
 * acknowledgement at no measurable cost, where the index's connection record (a JSON line of the
 * whole record, and a snapshot with `fdatasync` every few thousand) was too costly to write twice
 * per request. Opening replays the lines (a last line cut short by a crash is ignored); the file is
 * rewritten with the open requests alone past `COMPACT_BYTES` (a temporary file renamed over it),
 * so opening reads at most that plus a second of requests.
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
      } else journal.open.delete(line);
      good = start = end + 1;
    }
    if (good < buf.length) {
      fs.truncateSync(file, good);
      journal.bytes = good;
    }
    return journal;
  }

  /** The requests left open (accepted and not answered), oldest first. */
  requests(): OpenRequest[] {
    return [...this.open.values()];
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

  /** Request `id` was answered, and its answer is in the event log: it is no longer open. */
  remove(id: RequestId): void {
    const key = JSON.stringify(id);
    if (!this.open.delete(key)) return;
    if (this.stale !== undefined) return; // the rewrite leaves it out
    const failure = this.append(`-${key}\n`);
    // The file still holds it open: a restart would answer it twice. The rewrite fixes that.
    if (failure !== undefined) this.stale = failure;
  }

  /** At a checkpoint: rewrites the file when it grew past `COMPACT_BYTES` or is stale. */
  checkpoint(): void {
    if (this.stale !== undefined || this.bytes > COMPACT_BYTES) this.rewrite();
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
      const bytes = Buffer.from(line);
      writeAll(this.fd, [bytes], bytes.length, JOURNAL_NAME);
      this.bytes += bytes.length;
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

  /** Writes the open requests to a new file renamed over the journal; returns whether it could. */
  private rewrite(): boolean {
    const tmp = `${this.file}.tmp`;
    let text = "";
    for (const [key, { since }] of this.open) text += `+${since} ${key}\n`;
    const bytes = Buffer.from(text);
    let fd: number | undefined;
    try {
      fd = fs.openSync(tmp, "w");
      writeAll(fd, [bytes], bytes.length, JOURNAL_NAME);
      if (this.fsync) fs.fdatasyncSync(fd);
      fs.renameSync(tmp, this.file);
    } catch (error) {
      if (fd !== undefined) closeQuietly(fd);
      fs.rmSync(tmp, { force: true });
      this.stale ??= error as Error;
      return false;
    }
    this.close();
    this.fd = fd;
    this.bytes = bytes.length;
    this.stale = undefined;
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
