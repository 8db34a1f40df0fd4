import { nodeCrypto } from "../lazy-builtins.js";
import type { ChildHandle } from "./child.js";
import { ProcessError } from "./command.js";
import {
  OutputLog,
  Utf8Boundary,
  type LogCursor,
  type OutputEntry,
  type OutputStream,
} from "./output-log.js";
import { resizeTerminal, type WindowSize } from "./pty.js";

/** Who started a process: a client of `/v2/processes`, or an agent through ACP `terminal/create`. */
export type ProcessSource = "api" | "acp";

export interface ProcessSpec {
  command: string;
  args: string[];
  cwd: string;
  tty: WindowSize | undefined;
  source: ProcessSource;
}

export interface ProcessExit {
  exitCode: number | null;
  signal: string | null;
}

/** A process as `GET /v2/processes/{id}` shows it. */
export interface ProcessInfo {
  id: string;
  command: string;
  args: string[];
  cwd: string;
  tty: boolean;
  cols: number | null;
  rows: number | null;
  source: ProcessSource;
  status: "running" | "exited";
  pid: number;
  exitCode: number | null;
  signal: string | null;
  stdinOpen: boolean;
  createdAt: string;
  exitedAt: string | null;
  stdoutBytes: number;
  stderrBytes: number;
}

/**
 * Someone reading the output in order (a log follower, a terminal viewer). The process calls
 * `deliver` while `ready` is true, and `end` once the process exited and everything was delivered;
 * the reader calls `ManagedProcess.pump` when it becomes ready again.
 */
export interface OutputReader extends LogCursor {
  readonly ready: boolean;
  deliver(entries: OutputEntry[]): void;
  end(exit: ProcessExit, finalSeq: number): void;
}

const PUMP_BATCH_BYTES = 256 * 1024;

/** One process started through the process API: its child, its output log and its readers. */
export class ManagedProcess {
  readonly id = nodeCrypto().randomUUID();
  readonly createdAt = new Date();
  readonly log: OutputLog;
  /** Resolves once the process exited and its output is all in the log. */
  readonly exited: Promise<ProcessExit>;
  exit: ProcessExit | undefined;
  exitedAt: Date | undefined;
  private size: WindowSize | undefined;
  private stdinOpen = true;
  private paused = false;
  private readonly readers = new Set<OutputReader>();
  private readonly boundaries = { stdout: new Utf8Boundary(), stderr: new Utf8Boundary() };
  private pumpScheduled = false;

  constructor(
    readonly spec: ProcessSpec,
    private readonly child: ChildHandle,
    maxLogBytes: number,
  ) {
    this.size = spec.tty;
    this.log = new OutputLog(maxLogBytes);
    child.stdout.on("data", (chunk: Buffer) => this.output("stdout", chunk));
    child.stderr.on("data", (chunk: Buffer) => this.output("stderr", chunk));
    this.exited = child.exited.then(({ code, signal }) => {
      for (const stream of ["stdout", "stderr"] as const) {
        const rest = this.boundaries[stream].flush();
        if (rest) this.log.append(stream, rest);
      }
      this.exit = { exitCode: code, signal };
      this.exitedAt = new Date();
      this.stdinOpen = false;
      this.schedulePump();
      return this.exit;
    });
  }

  get running(): boolean {
    return this.exit === undefined;
  }

  /** Seq of the virtual `exit` event that follows the last output chunk. */
  get finalSeq(): number {
    return this.log.lastSeq + 1;
  }

  info(): ProcessInfo {
    return {
      id: this.id,
      command: this.spec.command,
      args: this.spec.args,
      cwd: this.spec.cwd,
      tty: this.spec.tty !== undefined,
      cols: this.size?.cols ?? null,
      rows: this.size?.rows ?? null,
      source: this.spec.source,
      status: this.running ? "running" : "exited",
      pid: this.child.pid,
      exitCode: this.exit?.exitCode ?? null,
      signal: this.exit?.signal ?? null,
      stdinOpen: this.stdinOpen,
      createdAt: this.createdAt.toISOString(),
      exitedAt: this.exitedAt?.toISOString() ?? null,
      stdoutBytes: this.log.bytes.stdout,
      stderrBytes: this.log.bytes.stderr,
    };
  }

  // ---- input ---------------------------------------------------------------------------------

  /** Writes to stdin (the terminal's input); resolves once the pipe took it. `eof` closes stdin. */
  async write(data: Buffer, eof = false): Promise<void> {
    if (!this.running) throw new ProcessError("process-exited", `Process ${this.id} has exited.`);
    if (!this.stdinOpen) throw new ProcessError("stdin-closed", `The stdin of process ${this.id} is closed.`);
    const stdin = this.child.stdin;
    // On a terminal, end of input is the EOF character (^D), as when typed: the pty stays open.
    const closing = eof && this.spec.tty === undefined;
    if (eof && !closing) data = Buffer.concat([data, Buffer.from([4])]);
    if (closing) this.stdinOpen = false;
    await new Promise<void>((resolve) => {
      const done = () => resolve();
      if (closing) stdin.end(data, done);
      else if (data.length === 0 || stdin.write(data)) resolve();
      else {
        stdin.once("drain", done);
        stdin.once("close", done);
      }
    });
  }

  // ---- signals -------------------------------------------------------------------------------

  /** SIGTERM (and SIGHUP on a terminal, which interactive shells honour), SIGKILL after `graceMs`. */
  async stop(graceMs: number): Promise<ProcessExit> {
    if (!this.running) return this.exited;
    if (this.spec.tty) this.child.signal("SIGHUP");
    this.child.signal("SIGTERM");
    const timer = setTimeout(() => this.child.signal("SIGKILL"), graceMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  kill(): Promise<ProcessExit> {
    if (this.running) this.child.signal("SIGKILL");
    return this.exited;
  }

  async resize(size: WindowSize): Promise<void> {
    if (!this.spec.tty) throw new ProcessError("not-a-terminal", `Process ${this.id} has no terminal.`);
    if (!this.running) throw new ProcessError("process-exited", `Process ${this.id} has exited.`);
    const device = await this.child.terminalPath();
    if (device !== undefined) await resizeTerminal(device, size);
    this.size = size;
  }

  // ---- output --------------------------------------------------------------------------------

  /**
   * The retained output of both streams in order, at most the last `limit` bytes cut at a
   * character boundary (ACP `terminal/output` semantics); `truncated` if anything was left out.
   */
  combinedOutput(limit: number): { output: string; truncated: boolean } {
    const all = Buffer.concat(this.log.after(this.log.oldestCursor).map((e) => e.data));
    let start = Math.max(0, all.length - limit);
    while (start < all.length && (all[start]! & 0xc0) === 0x80) start++; // not inside a character
    return {
      output: all.subarray(start).toString("utf8"),
      truncated: start > 0 || this.log.droppedBytes > 0,
    };
  }

  /** Starts delivering output after `reader.cursor` to `reader`. */
  attach(reader: OutputReader): void {
    this.readers.add(reader);
    this.log.attach(reader);
    this.pump(reader);
  }

  detach(reader: OutputReader): void {
    this.readers.delete(reader);
    this.log.detach(reader);
    this.resumeIfRoom();
  }

  /** Delivers what `reader` has not seen yet, as long as it is ready. */
  pump(reader: OutputReader): void {
    if (!this.readers.has(reader)) return;
    while (reader.ready) {
      const entries = this.log.after(reader.cursor, PUMP_BATCH_BYTES);
      if (entries.length === 0) {
        if (this.exit) {
          this.detach(reader);
          reader.end(this.exit, this.finalSeq);
        }
        break;
      }
      reader.cursor = entries[entries.length - 1]!.seq;
      reader.deliver(entries);
    }
    this.log.advanced();
    this.resumeIfRoom();
  }

  private output(stream: OutputStream, chunk: Buffer): void {
    const data = this.boundaries[stream].split(chunk);
    if (data.length > 0) this.log.append(stream, data);
    if (this.log.overLimit && !this.paused) {
      // A reader is behind by a whole log: stop reading the process until it catches up.
      this.paused = true;
      this.child.stdout.pause();
      this.child.stderr.pause();
    }
    this.schedulePump();
  }

  private resumeIfRoom(): void {
    if (!this.paused || this.log.overLimit) return;
    this.paused = false;
    this.child.stdout.resume();
    this.child.stderr.resume();
  }

  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    // Chunks read in one tick go out in one write per reader.
    queueMicrotask(() => {
      this.pumpScheduled = false;
      for (const reader of [...this.readers]) this.pump(reader);
    });
  }
}
