import fs from "node:fs";
import path from "node:path";
import { closeQuietly, removeFile, syncDirectorySync, writeRange } from "./file-io.js";

/**
 * A table of the server's index: JSON values by key. With a data directory every change is kept
 * on disk (`IndexJournal`); in memory it is a map.
 */
export interface StateTable<T> {
  get(key: string): T | undefined;
  /** Stores `value` (written through: on disk before this returns). */
  set(key: string, value: T): void;
  delete(key: string): void;
  /**
   * `key`'s value (the object `get` returned) changed in place: it is written with the next
   * checkpoint (about once a second) instead of at once, for counters that change with every event.
   */
  changed(key: string): void;
  entries(): IterableIterator<[string, T]>;
  readonly size: number;
  /**
   * Why the last change could not be written (ENOSPC, EIO…), until a later write succeeds;
   * undefined when every change is on disk (always, in memory). Changes are kept in memory meanwhile.
   */
  readonly failure: Error | undefined;
}

/** The tables of one store. */
export interface Tables {
  table<T>(name: string): StateTable<T>;
  /** Writes the values marked `changed`. */
  checkpoint(): void;
  close(): void;
}

/** Tables that live and die with the process. */
export class MemoryTables implements Tables {
  private readonly tables = new Map<string, Map<string, unknown>>();

  table<T>(name: string): StateTable<T> {
    let map = this.tables.get(name);
    if (!map) this.tables.set(name, (map = new Map()));
    const values = map as Map<string, T>;
    return {
      get: (key) => values.get(key),
      set: (key, value) => void values.set(key, value),
      delete: (key) => void values.delete(key),
      changed: () => {},
      entries: () => values.entries(),
      get size() {
        return values.size;
      },
      failure: undefined,
    };
  }

  checkpoint(): void {}
  close(): void {}
}

const SNAPSHOT = "index.json";
const JOURNAL = "index.journal";
/** The journal is folded into a new snapshot once it is this large and larger than the snapshot. */
const COMPACT_BYTES = 4 * 1024 * 1024;

type JournalLine = [table: string, key: string, value?: unknown];

/**
 * The index on disk: a snapshot (`index.json`, all tables) and a journal (`index.journal`, one
 * JSON line per change since the snapshot). A change is one `write` of its line; opening replays
 * the journal onto the snapshot, ignoring a last line cut short by a crash. When the journal has
 * grown past the snapshot it is folded into a new snapshot (written to a temporary file and
 * renamed over the old one, then the journal is emptied; replaying a journal onto a snapshot
 * that already holds it changes nothing).
 */
export class IndexJournal implements Tables {
  private readonly tables = new Map<string, Map<string, unknown>>();
  private readonly dirty = new Map<string, Set<string>>();
  private fd: number;
  private journalBytes: number;
  private snapshotBytes = 0;
  /** The last write that failed (ENOSPC…): changes stay in memory and are written with the next snapshot. */
  failure: Error | undefined;
  /** Set when a write reached the journal since the last `takeUnsynced`. */
  private unsynced = false;

  private constructor(
    private readonly dir: string,
    private readonly report: (message: string, fields: Record<string, unknown>) => void,
  ) {
    this.read();
    const journal = path.join(dir, JOURNAL);
    this.fd = fs.openSync(journal, "a");
    this.journalBytes = fs.fstatSync(this.fd).size;
  }

  /** Opens (or creates) the index in `dir`; `report` hears of anything that had to be skipped. */
  static open(dir: string, report: (message: string, fields: Record<string, unknown>) => void): IndexJournal {
    fs.mkdirSync(dir, { recursive: true });
    return new IndexJournal(dir, report);
  }

  table<T>(name: string): StateTable<T> {
    const values = this.map(name) as Map<string, T>;
    const failure = (): Error | undefined => this.failure;
    return {
      get: (key) => values.get(key),
      set: (key, value) => {
        values.set(key, value);
        this.dirty.get(name)?.delete(key);
        this.append([name, key, value]);
      },
      delete: (key) => {
        if (!values.delete(key)) return;
        this.dirty.get(name)?.delete(key);
        this.append([name, key]);
      },
      changed: (key) => {
        let keys = this.dirty.get(name);
        if (!keys) this.dirty.set(name, (keys = new Set()));
        keys.add(key);
      },
      entries: () => values.entries(),
      get size() {
        return values.size;
      },
      get failure() {
        return failure();
      },
    };
  }

  checkpoint(): void {
    for (const [name, keys] of this.dirty) {
      const values = this.map(name);
      for (const key of keys) if (values.has(key)) this.append([name, key, values.get(key)]);
      keys.clear();
    }
    if (
      this.failure !== undefined ||
      (this.journalBytes > COMPACT_BYTES && this.journalBytes > this.snapshotBytes)
    )
      this.compact();
  }

  /** The journal's descriptor if it was written since the last call (for a group commit's `fdatasync`). */
  takeUnsynced(): number | undefined {
    if (!this.unsynced) return undefined;
    this.unsynced = false;
    return this.fd;
  }

  close(): void {
    this.checkpoint();
    closeQuietly(this.fd);
  }

  private map(name: string): Map<string, unknown> {
    let map = this.tables.get(name);
    if (!map) this.tables.set(name, (map = new Map()));
    return map;
  }

  private append(line: JournalLine): void {
    if (this.failure !== undefined) return; // the next snapshot holds it
    // Bytes, not the string: `fs.writeSync` of a string takes another path through it than the
    // segment writes' buffers, and TurboFan's code for it (compiled for those) deoptimised at the
    // first line written during a connection's turns.
    const bytes = Buffer.from(JSON.stringify(line) + "\n");
    try {
      writeRange(this.fd, bytes, 0, bytes.length, "the event log index");
      this.journalBytes += bytes.length;
      this.unsynced = true;
    } catch (error) {
      this.failure = error as Error;
      this.report(
        "cannot write the event log index; changes are kept in memory until a snapshot can be written",
        {
          error: String(error),
        },
      );
    }
  }

  private read(): void {
    const snapshot = path.join(this.dir, SNAPSHOT);
    try {
      const text = fs.readFileSync(snapshot, "utf8");
      this.snapshotBytes = text.length;
      const tables = JSON.parse(text) as Record<string, Record<string, unknown>>;
      for (const [name, entries] of Object.entries(tables))
        this.tables.set(name, new Map(Object.entries(entries)));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT")
        this.report("the event log index snapshot is unreadable; starting from the journal alone", {
          file: snapshot,
          error: String(error),
        });
    }
    const journal = path.join(this.dir, JOURNAL);
    let text: string;
    try {
      text = fs.readFileSync(journal, "utf8");
    } catch {
      return;
    }
    let good = 0;
    for (let start = 0; start < text.length;) {
      const end = text.indexOf("\n", start);
      if (end === -1) break; // a line cut short by a crash: it never completed
      try {
        const [name, key, ...value] = JSON.parse(text.slice(start, end)) as JournalLine;
        if (value.length === 0) this.map(name).delete(key);
        else this.map(name).set(key, value[0]);
      } catch {
        this.report("skipped an unreadable line of the event log index", { file: journal, offset: start });
      }
      good += Buffer.byteLength(text.slice(start, end + 1));
      start = end + 1;
    }
    if (good < Buffer.byteLength(text)) fs.truncateSync(journal, good);
  }

  /** Writes every table to a new snapshot and empties the journal. */
  private compact(): void {
    const snapshot = path.join(this.dir, SNAPSHOT);
    const tmp = `${snapshot}.tmp`;
    const tables: Record<string, Record<string, unknown>> = {};
    for (const [name, values] of this.tables) tables[name] = Object.fromEntries(values);
    try {
      const text = JSON.stringify(tables);
      const fd = fs.openSync(tmp, "w");
      try {
        fs.writeSync(fd, text);
        fs.fdatasyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      fs.renameSync(tmp, snapshot);
      // The journal is emptied next: the snapshot's name must outlive a power loss first.
      syncDirectorySync(this.dir);
      fs.ftruncateSync(this.fd, 0);
      this.snapshotBytes = text.length;
      this.journalBytes = 0;
      if (this.failure !== undefined) this.report("the event log index is written again", {});
      this.failure = undefined;
    } catch (error) {
      removeFile(tmp);
      this.failure ??= error as Error;
    }
  }
}
