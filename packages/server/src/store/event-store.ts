/**
 * Where connections keep their events and the server its index: the seam between the runtime and
 * storage (like the MCP SDK's `EventStore`). `memoryStore()` keeps everything in the process;
 * `diskStore()` keeps each connection's events in segment files and the index (connections, their
 * sessions, Sandbox metadata) in a journal under the data directory, so that a restarted server
 * finds them again.
 */
import fs from "node:fs";
import path from "node:path";
import { ByteWindow, type EventBatch, type WindowLimits } from "./byte-window.js";
import { batchLength } from "./event-batch.js";
import { removeFile } from "./file-io.js";
import { CorruptLogError, SegmentFiles, type Repair, type SegmentLimits, type TailMark } from "./segments.js";
import { IndexJournal, MemoryTables, type StateTable, type Tables } from "./tables.js";
import { RequestJournal, type RequestId } from "./request-journal.js";

export type { EventBatch, WindowLimits } from "./byte-window.js";
export { CorruptLogError } from "./segments.js";
export type { Repair } from "./segments.js";
export type { StateTable } from "./tables.js";
export type { RequestId } from "./request-journal.js";

/** The event log's settings (config file `eventLog`). */
export interface EventLogOptions extends SegmentLimits {
  /** Keep events and the index in memory only (nothing survives a restart). */
  inMemory: boolean;
  /** `fdatasync` what was written before it is delivered, so it survives a power loss too. */
  fsync: boolean;
  /** With `fsync`: how long writes are gathered before one `fdatasync` covers them all (group commit). */
  fsyncIntervalMs: number;
  /**
   * Most bytes of delivered events each connection keeps in memory (at most the runtime's replay
   * window). On disk the window is only a cache for readers resuming a little behind: older events
   * are read back from the segments. Events no reader has received yet stay whatever this says.
   */
  windowBytes: number;
}

export const DEFAULT_EVENT_LOG_OPTIONS: EventLogOptions = {
  inMemory: false,
  fsync: false,
  fsyncIntervalMs: 5,
  // 1 MiB: a replay from the page cache is about as fast as from memory (bench/README.md), and the
  // runtime's 16 MiB replay window, kept per connection in memory, was most of a streaming
  // server's growth off the JS heap.
  windowBytes: 1024 * 1024,
  segmentBytes: 8 * 1024 * 1024,
  retentionBytes: 128 * 1024 * 1024,
  retentionMs: 24 * 60 * 60_000,
};

/** One connection's events, numbered from 1. */
export interface ConnectionLog {
  /** The seq the next appended event gets. */
  readonly nextSeq: number;
  /** The newest seq that may be delivered: written (and synced, with `fsync`). Write before deliver. */
  readonly durableSeq: number;
  /** The oldest cursor a reader may resume from (the events after it are kept). */
  readonly oldestCursor: number;
  /** Why appended events cannot be written at the moment (ENOSPC…); they are kept and retried. */
  readonly failure: Error | undefined;
  /**
   * Called when `durableSeq` moves on by itself (a sync completed, a failed write succeeded), not
   * when a `commit` moved it: its caller delivers then.
   */
  onDurable: (() => void) | undefined;
  /** Appends one event, its JSON as text (encoded to UTF-8); returns its seq. */
  append(data: string): number;
  /** Appends one event, its JSON as UTF-8 bytes: `bytes` from `start` to `end` (copied); returns its seq. */
  appendBytes(bytes: Uint8Array, start: number, end: number): number;
  /**
   * Writes what was appended since the last commit. Without `fsync` what it wrote is durable when it
   * returns (`onDurable` is not called for it): the caller delivers it.
   */
  commit(): void;
  /**
   * Events after `cursor`, at most up to `durableSeq`, about `maxBytes` of them (at least one);
   * undefined when there is none. Throws `CorruptLogError` when a segment on disk is unreadable.
   */
  read(cursor: number, maxBytes: number): EventBatch | undefined;
  /**
   * Events after `seq` were not read yet: they stay in memory past the replay limits, so that a
   * reader that fell behind reads them without going to disk (and, in memory, at all).
   */
  hold(seq: number): void;
  /** Forgets every event up to `seq` (they were found unreadable). */
  dropThrough(seq: number): void;
  /**
   * Records client request `id` as in flight, so that a restart finds it unanswered and answers it
   * (on disk: one line appended to the connection's `requests.journal`, see `RequestJournal`);
   * returns why it could not be recorded (ENOSPC…), in which case it must not run.
   */
  recordRequest(id: RequestId): Error | undefined;
  /**
   * Request `id` was answered by an event appended at or before `seq`: it is taken out of the
   * record once that event is durable (so a crash before it is answers it still).
   */
  settleRequest(id: RequestId, seq: number): void;
  /** The requests an earlier run left in flight (`openLog`): the restart answers them. */
  unansweredRequests(): RequestId[];
  /** Releases the log's file (shutdown); it is kept. */
  close(): void;
  /** Deletes the log. */
  remove(): void;
}

export interface EventStore {
  /** Whether connections survive a restart. */
  readonly durable: boolean;
  /** Where the store lives, for messages; undefined in memory. */
  readonly dir: string | undefined;
  /** A table of the index (connections, sessions, extension state). */
  table<T>(name: string): StateTable<T>;
  /** The log of a new connection. Throws the filesystem's error when it cannot be created (ENOSPC…). */
  createLog(connectionId: string, window: WindowLimits): ConnectionLog;
  /**
   * The log a connection left in an earlier run, with what had to be repaired (a torn tail cut
   * off); undefined when none is left.
   */
  openLog(
    connectionId: string,
    window: WindowLimits,
  ): { log: ConnectionLog; repair: Repair | undefined } | undefined;
  /** Writes what is pending and releases the files. */
  close(): void;
}

export type StoreReport = (message: string, fields: Record<string, unknown>) => void;

// ---- in memory ---------------------------------------------------------------------------------

/** Everything in the process: the replay window is the log. */
export function memoryStore(): EventStore {
  const tables = new MemoryTables();
  return {
    durable: false,
    dir: undefined,
    table: (name) => tables.table(name),
    createLog: (_id, window) => new MemoryLog(window),
    openLog: () => undefined,
    close: () => {},
  };
}

class MemoryLog implements ConnectionLog {
  private readonly window: ByteWindow;
  onDurable: (() => void) | undefined;
  readonly failure = undefined;

  constructor(limits: WindowLimits) {
    this.window = new ByteWindow(limits, 1, false);
  }

  get nextSeq(): number {
    return this.window.nextSeq;
  }

  get durableSeq(): number {
    return this.window.nextSeq - 1;
  }

  get oldestCursor(): number {
    return this.window.firstSeq - 1;
  }

  append(data: string): number {
    return this.window.append(data);
  }

  appendBytes(bytes: Uint8Array, start: number, end: number): number {
    return this.window.appendBytes(bytes, start, end);
  }

  commit(): void {
    this.window.trim();
  }

  read(cursor: number, maxBytes: number): EventBatch | undefined {
    return cursor >= this.durableSeq ? undefined : this.window.read(cursor, maxBytes);
  }

  hold(seq: number): void {
    this.window.hold(seq);
  }

  dropThrough(): void {}
  // Nothing outlives the process: there is nothing to record.
  recordRequest(): undefined {}
  settleRequest(): void {}
  unansweredRequests(): RequestId[] {
    return [];
  }
  close(): void {}
  remove(): void {}
}

// ---- on disk -----------------------------------------------------------------------------------

/** How often changed counters of the index are written, and failed writes retried. */
const CHECKPOINT_MS = 1000;

/** Another server holds the data directory's event log. */
export class StoreLockedError extends Error {}

/**
 * The event log in `<dataDir>/event-log/`: `index.json` + `index.journal`, one directory of
 * segments per connection, and a `lock` naming the server that uses it.
 */
export function diskStore(dataDir: string, options: EventLogOptions, report: StoreReport): EventStore {
  return new DiskStore(path.join(dataDir, "event-log"), options, report);
}

class DiskStore implements EventStore {
  readonly durable = true;
  private readonly tables: Tables & IndexJournal;
  private readonly logs = new Set<DiskLog>();
  private readonly unsynced = new Set<DiskLog>();
  private syncTimer: NodeJS.Timeout | undefined;
  private syncing = false;
  private readonly checkpointTimer: NodeJS.Timeout;
  private readonly lockFile: string;
  /** Where each connection's last segment stood when last known whole (see `TailMark`). */
  private readonly tails: StateTable<TailMark>;

  constructor(
    readonly dir: string,
    private readonly options: EventLogOptions,
    private readonly report: StoreReport,
  ) {
    fs.mkdirSync(dir, { recursive: true });
    this.lockFile = path.join(dir, "lock");
    takeLock(this.lockFile, dir);
    this.tables = IndexJournal.open(dir, report);
    this.tails = this.tables.table<TailMark>("tails");
    this.checkpointTimer = setInterval(() => this.checkpoint(), CHECKPOINT_MS);
    this.checkpointTimer.unref();
  }

  table<T>(name: string): StateTable<T> {
    return this.tables.table<T>(name);
  }

  createLog(connectionId: string, window: WindowLimits): ConnectionLog {
    const dir = this.logDir(connectionId);
    const files = SegmentFiles.create(dir, 1, this.options, this.options.fsync);
    const requests = RequestJournal.create(dir, this.options.fsync);
    return this.track(new DiskLog(this, connectionId, files, requests, this.cache(window)));
  }

  openLog(connectionId: string, window: WindowLimits) {
    const mark = this.tails.get(connectionId);
    const dir = this.logDir(connectionId);
    const opened = SegmentFiles.open(dir, this.options, this.options.fsync, mark);
    if (!opened) {
      this.tails.delete(connectionId);
      return undefined;
    }
    opened.files.retain(Date.now());
    const requests = RequestJournal.open(dir, this.options.fsync);
    const since = requests.oldestSince();
    if (since !== undefined) settleLogged(opened.files, requests, since);
    const log = new DiskLog(this, connectionId, opened.files, requests, this.cache(window));
    return { log: this.track(log), repair: opened.repair };
  }

  /** The window a log keeps in memory: the runtime's replay window, within `windowBytes`. */
  private cache(window: WindowLimits): WindowLimits {
    return { maxEvents: window.maxEvents, maxBytes: Math.min(window.maxBytes, this.options.windowBytes) };
  }

  close(): void {
    clearInterval(this.checkpointTimer);
    clearTimeout(this.syncTimer);
    for (const log of this.logs) {
      log.commit();
      if (this.options.fsync) {
        for (const fd of log.files.syncTargets().fds) syncQuietly(fd);
        const journal = log.requests.takeUnsynced();
        if (journal !== undefined) syncQuietly(journal);
      }
      log.close();
    }
    this.tables.close();
    if (this.options.fsync) {
      const journal = this.tables.takeUnsynced();
      if (journal !== undefined) syncQuietly(journal);
    }
    removeFile(this.lockFile);
  }

  /**
   * @internal A log wrote events: they are durable now (`notify`: its reader is told; a commit's
   * caller delivers them itself), or after the next group commit.
   */
  written(log: DiskLog, notify: boolean): void {
    if (!this.options.fsync) return log.durableThrough(log.writtenSeq, undefined, notify);
    this.syncSoon(log);
  }

  /** @internal With fsync the request journal's new lines are synced by the next group commit. */
  journalWritten(log: DiskLog): void {
    if (this.options.fsync) this.syncSoon(log);
  }

  /** `log` has writes to sync: the next group commit, within `fsyncIntervalMs`, takes them. */
  private syncSoon(log: DiskLog): void {
    this.unsynced.add(log);
    this.scheduleGroupCommit();
  }

  private scheduleGroupCommit(): void {
    this.syncTimer ??= setTimeout(() => void this.groupCommit(), this.options.fsyncIntervalMs);
  }

  /** @internal */
  journalFailed(log: DiskLog, error: Error): void {
    this.report("cannot write the request journal; the connection's requests are refused until it can be", {
      dir: log.files.dir,
      error: String(error),
    });
  }

  /** @internal */
  failed(log: DiskLog, error: Error): void {
    this.report("cannot write the event log; the connection's output is held until it can be written", {
      dir: log.files.dir,
      error: String(error),
    });
  }

  /** @internal The log was closed (shutdown): its segments are whole as they are. */
  closed(log: DiskLog): void {
    this.tails.set(log.id, log.files.tail());
  }

  /** @internal The log is deleted: so is its mark. */
  unmark(log: DiskLog): void {
    this.tails.delete(log.id);
  }

  /** @internal */
  forget(log: DiskLog): void {
    this.logs.delete(log);
    this.unsynced.delete(log);
  }

  private track(log: DiskLog): DiskLog {
    this.logs.add(log);
    return log;
  }

  private logDir(connectionId: string): string {
    // Connection ids are UUIDs made by this server; anything else must not name a path.
    if (!/^[0-9a-f-]{36}$/.test(connectionId)) throw new Error(`not a connection id: ${connectionId}`);
    return path.join(this.dir, connectionId);
  }

  private checkpoint(): void {
    // About once a second, not per write: after a crash, recovery reads at most the last second's writes.
    // Without fsync what is written is as whole as it gets, so the mark is where the log stands now;
    // with fsync it is where the last group commit synced it.
    for (const log of this.logs) {
      if (!log.moved) continue;
      log.moved = false;
      const mark = this.options.fsync ? log.mark : log.files.tail();
      if (mark) this.tails.set(log.id, mark);
    }
    this.tables.checkpoint();
    const now = Date.now();
    for (const log of this.logs) {
      if (log.failure !== undefined) log.retry();
      log.retain(now);
      log.requests.checkpoint(log.durableSeq);
    }
  }

  /**
   * One `fdatasync` per file covers every write made since the previous group commit; the events
   * those writes hold are delivered once it completes. Writes made while a sync runs wait for the next.
   */
  private async groupCommit(): Promise<void> {
    this.syncTimer = undefined;
    if (this.syncing) return;
    this.syncing = true;
    const logs = [...this.unsynced];
    this.unsynced.clear();
    const batches = logs.map((log) => ({
      log,
      seq: log.writtenSeq,
      mark: log.files.tail(),
      targets: log.files.syncTargets(),
      journal: log.requests.takeUnsynced(),
    }));
    const index = this.tables.takeUnsynced();
    const syncs: Array<Promise<void>> = [];
    for (const { log, targets, journal } of batches) {
      for (const fd of targets.fds) syncs.push(fdatasync(fd));
      if (journal !== undefined) syncs.push(fdatasync(journal));
      if (targets.dir) syncs.push(syncDirectory(log.files.dir), syncDirectory(this.dir));
    }
    if (index !== undefined) syncs.push(fdatasync(index));
    const results = await Promise.allSettled(syncs);
    for (const result of results)
      if (result.status === "rejected")
        this.report("fdatasync of the event log failed", { error: String(result.reason) });
    for (const { log, seq, mark, targets } of batches) {
      log.files.closeRetired(targets.fds);
      log.durableThrough(seq, mark, true);
    }
    this.syncing = false;
    if (this.unsynced.size > 0) this.scheduleGroupCommit();
  }
}

class DiskLog implements ConnectionLog {
  private readonly window: ByteWindow;
  /** The newest seq written to the segments. */
  writtenSeq: number;
  private durable: number;
  failure: Error | undefined;
  onDurable: (() => void) | undefined;
  /** With fsync, where the last segment stood at the newest group commit (without, the checkpoint reads it). */
  mark: TailMark | undefined;
  /** The mark moved (written, and synced with `fsync`) since the last checkpoint, which keeps it. */
  moved = false;
  /** Set while requests are refused because the journal cannot be written (reported once). */
  private refusing = false;
  /** Requests answered by events not yet durable, oldest first: settled once they are. */
  private settling: Array<{ id: RequestId; seq: number }> = [];

  constructor(
    private readonly store: DiskStore,
    readonly id: string,
    readonly files: SegmentFiles,
    readonly requests: RequestJournal,
    limits: WindowLimits,
  ) {
    this.window = new ByteWindow(limits, files.nextSeq, true);
    this.writtenSeq = files.nextSeq - 1;
    this.durable = this.writtenSeq;
  }

  get nextSeq(): number {
    return this.window.nextSeq;
  }

  get durableSeq(): number {
    return this.durable;
  }

  get oldestCursor(): number {
    // Live: a new segment deletes old ones at once (retention), not only at the next checkpoint.
    return this.files.oldestSeq - 1;
  }

  append(data: string): number {
    return this.window.append(data);
  }

  appendBytes(bytes: Uint8Array, start: number, end: number): number {
    return this.window.appendBytes(bytes, start, end);
  }

  commit(): void {
    if (this.write()) this.store.written(this, false);
  }

  /** @internal The store retries a failed write (checkpoint): what it writes is delivered through `onDurable`. */
  retry(): void {
    if (this.write()) this.store.written(this, true);
  }

  /** Writes the sealed frames not written yet; whether any were. */
  private write(): boolean {
    const now = Date.now();
    const frames = this.window.sealed(now);
    if (frames === undefined) return false;
    try {
      this.files.write(frames, this.window.nextSeq - 1 - this.writtenSeq, now);
    } catch (error) {
      if (this.failure === undefined) this.store.failed(this, error as Error);
      this.failure = error as Error;
      return false;
    }
    this.window.markTaken();
    this.window.trim();
    this.writtenSeq = this.window.nextSeq - 1;
    this.failure = undefined;
    return true;
  }

  /**
   * @internal Events through `seq` are safe (with fsync, the segment is synced up to `mark`): they
   * may be delivered; `notify`: `onDurable` says so (not for a commit, whose caller delivers).
   */
  durableThrough(seq: number, mark: TailMark | undefined, notify: boolean): void {
    if (mark) this.mark = mark;
    this.moved = true;
    if (seq <= this.durable) return;
    this.durable = seq;
    if (this.settling.length > 0) this.settleDurable();
    if (notify) this.onDurable?.();
  }

  recordRequest(id: RequestId): Error | undefined {
    const failure = this.requests.add(id, this.window.nextSeq);
    if (failure === undefined) {
      this.refusing = false;
      this.store.journalWritten(this);
    } else if (!this.refusing) {
      this.refusing = true;
      this.store.journalFailed(this, failure);
    }
    return failure;
  }

  settleRequest(id: RequestId, seq: number): void {
    if (seq > this.durable || this.settling.length > 0) return void this.settling.push({ id, seq });
    this.requests.remove(id);
  }

  unansweredRequests(): RequestId[] {
    return this.requests.requests().map((r) => r.id);
  }

  private settleDurable(): void {
    let done = 0;
    while (done < this.settling.length && this.settling[done]!.seq <= this.durable)
      this.requests.remove(this.settling[done++]!.id);
    this.settling.splice(0, done);
  }

  read(cursor: number, maxBytes: number): EventBatch | undefined {
    if (cursor >= this.durable) return undefined;
    return cursor + 1 >= this.window.firstSeq
      ? this.window.read(cursor, maxBytes, this.durable)
      : this.files.read(cursor, maxBytes, this.durable);
  }

  hold(seq: number): void {
    this.window.hold(seq);
  }

  dropThrough(seq: number): void {
    this.files.dropThrough(seq);
  }

  /** @internal Deletes segments past the retention limits. */
  retain(now: number): void {
    this.files.retain(now);
  }

  close(): void {
    this.store.forget(this);
    // What is left is whole: the next start reads none of it.
    this.store.closed(this);
    this.files.close();
    // Left with the open requests alone: the next start reads no events for the others.
    this.requests.checkpoint(this.durable);
    this.requests.close();
  }

  remove(): void {
    this.store.forget(this);
    this.store.unmark(this);
    this.requests.close();
    this.files.remove();
  }
}

/**
 * Takes out of the journal the requests it leaves open whose answer is in the log: an answer
 * writes nothing to the journal (its event says it), so every request accepted since the
 * journal's last checkpoint is found here, answered or not. The events are read from `from`, the
 * oldest open request's seq: about a second of output at most, since each checkpoint moves the
 * open requests' seqs past the durable events (`RequestJournal.checkpoint`), and only when a
 * request is open. An answer counts only from the seq its request was recorded at: a client may
 * reuse the id of a request answered before.
 */
function settleLogged(files: SegmentFiles, requests: RequestJournal, from: number): void {
  const open = new Map(requests.requests().map((r) => [JSON.stringify(r.id), r]));
  const through = files.nextSeq - 1;
  for (let cursor = Math.max(from, files.oldestSeq) - 1; cursor < through && open.size > 0;) {
    let batch: EventBatch | undefined;
    try {
      batch = files.read(cursor, 1024 * 1024, through);
    } catch (error) {
      // A segment that cannot be read (reported by the read that reaches it): the answers after it still count.
      if (!(error instanceof CorruptLogError) || error.throughSeq <= cursor) return;
      cursor = error.throughSeq;
      continue;
    }
    if (batch === undefined) return;
    for (let i = 0; i < batchLength(batch); i++) {
      const text = batch.buffers[i]!.toString("utf8", batch.starts[i], batch.ends[i]);
      if (!text.includes('"id"')) continue;
      const id = responseIdOf(text);
      if (id === undefined) continue;
      const key = JSON.stringify(id);
      const request = open.get(key);
      if (request === undefined || batch.first + i < request.since) continue;
      open.delete(key);
      requests.remove(request.id);
    }
    cursor = batch.first + batchLength(batch) - 1;
  }
}

/** The id of a JSON-RPC response, if the event is one. */
function responseIdOf(text: string): RequestId | undefined {
  try {
    const message = JSON.parse(text) as { id?: unknown; method?: unknown };
    if (message.method !== undefined) return undefined;
    return typeof message.id === "string" || typeof message.id === "number" ? message.id : undefined;
  } catch {
    return undefined;
  }
}

function fdatasync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fs.fdatasync(fd, (error) => (error ? reject(error) : resolve())));
}

async function syncDirectory(dir: string): Promise<void> {
  const handle = await fs.promises.open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

function syncQuietly(fd: number): void {
  try {
    fs.fdatasyncSync(fd);
  } catch {
    // Closed already, or the disk failed: nothing more can be done at shutdown.
  }
}

/**
 * Makes this server the only user of the event log: a lock file with its pid (and the pid's start
 * time, so a pid reused after a crash is not mistaken for a live server). A lock left by a server
 * that is gone (killed) is taken over.
 */
function takeLock(file: string, dir: string): void {
  const mine = `${process.pid} ${processStart(process.pid) ?? ""}\n`;
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(file, mine, { flag: "wx" });
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const [pid, start] = fs.readFileSync(file, "utf8").trim().split(" ");
    if (
      pid !== undefined &&
      isAlive(Number(pid)) &&
      (start === undefined || start === "" || processStart(Number(pid)) === start)
    )
      throw new StoreLockedError(
        `Another sandbox-agent server (pid ${pid}) uses the event log in ${dir}. ` +
          "Give this server its own --data-dir, or run it with --in-memory.",
      );
    removeFile(file);
  }
  throw new StoreLockedError(`Could not take the lock ${file}.`);
}

function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The start time of a process (`/proc/<pid>/stat` field 22), where Linux tells it. */
function processStart(pid: number): string | undefined {
  try {
    return fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ")[19];
  } catch {
    return undefined;
  }
}
