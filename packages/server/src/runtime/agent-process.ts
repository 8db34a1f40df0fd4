import { spawn, type ChildProcess } from "node:child_process";
import type { AgentSpec } from "../agents/types.js";
import { LineSplitter, type LineScan } from "./line-splitter.js";
import type { OrphanGuard } from "./orphan-guard.js";
import { TextRing } from "./ring-buffer.js";

export interface AgentExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the process could not be started at all (e.g. ENOENT). */
  spawnError?: string;
  /** The errno code of `spawnError` (`ENOENT`, `EMFILE`, `EAGAIN`…). */
  spawnErrorCode?: string;
  stderrTail: string;
}

export interface AgentProcessOptions {
  env: Record<string, string>;
  cwd?: string;
  maxLineBytes: number;
  /** One line of stdout: its bytes, `chunk` from `start` to `end` (see `LineSplitter`). */
  onLine: (chunk: Buffer, start: number, end: number) => void;
  /** Takes lines where they are first (`LineSplitter`'s `scan`): those it takes skip `onLine`. */
  scanLines?: LineScan;
  onOversizeLine: (bytes: number) => void;
  /** The agent closed its stdout but did not exit: no answer can come any more. */
  onOutputClosed: () => void;
  onStderr?: (text: string) => void;
  /** Kills the agent's group if the server dies without stopping it. */
  guard?: OrphanGuard;
}

const STDERR_RING_CHARS = 64 * 1024;
/**
 * An agent that exits closes its stdout a moment before its exit is reported; one that closed
 * stdout and still runs after this long is broken (it can never answer again).
 */
const OUTPUT_CLOSED_GRACE_MS = 500;

/**
 * One agent child process speaking NDJSON over stdio, in its own process group so that DELETE
 * and shutdown also reach the helpers it spawned. stderr is always drained into a ring buffer.
 */
export class AgentProcess {
  readonly exited: Promise<AgentExit>;
  private readonly child: ChildProcess | undefined;
  private readonly stderr = new TextRing(STDERR_RING_CHARS);
  private exitInfo: AgentExit | undefined;
  private finish!: (info: Omit<AgentExit, "stderrTail">) => void;
  private discarding = false;

  constructor(spec: AgentSpec, options: AgentProcessOptions) {
    this.exited = new Promise((resolve) => {
      this.finish = (info) => {
        if (this.exitInfo) return;
        this.exitInfo = { ...info, stderrTail: this.stderr.tail(4096) };
        if (this.child?.pid !== undefined) options.guard?.remove(this.child.pid);
        resolve(this.exitInfo);
      };
    });
    this.child = this.start(spec, options);
  }

  /** Spawns the agent; spawn failures (ENOENT, EMFILE…) resolve `exited` with `spawnError`, never throw. */
  private start(spec: AgentSpec, options: AgentProcessOptions): ChildProcess | undefined {
    const spawnFailed = (error: unknown) => {
      const e = error as NodeJS.ErrnoException;
      this.finish({ code: null, signal: null, spawnError: e.message, spawnErrorCode: e.code });
    };
    let child: ChildProcess;
    try {
      child = spawn(spec.command, spec.args ?? [], {
        cwd: spec.cwd ?? options.cwd,
        env: options.env,
        stdio: ["pipe", "pipe", "pipe"],
        detached: true,
      });
    } catch (error) {
      spawnFailed(error);
      return undefined;
    }
    // A spawn error arrives as an event, and so may a failed kill: with no listener either would
    // be thrown out of the event loop and end the server.
    child.on("error", (error) => {
      if (child.pid === undefined) spawnFailed(error);
    });
    const { stdin, stdout, stderr } = child;
    // Out of descriptors (EMFILE), Node cannot even make the pipes: "error" follows on the next tick.
    if (!stdin || !stdout || !stderr || child.pid === undefined) return child;
    options.guard?.add(child.pid);
    const splitter = new LineSplitter(
      options.maxLineBytes,
      options.onLine,
      options.onOversizeLine,
      options.scanLines,
    );
    stdout.on("data", (chunk: Buffer) => {
      if (!this.discarding) splitter.push(chunk);
    });
    stdout.once("end", () => this.outputEnded(options.onOutputClosed));
    stderr.setEncoding("utf8").on("data", (text: string) => {
      this.stderr.push(text);
      options.onStderr?.(text);
    });
    // Pipe errors (EPIPE on a dead agent's stdin…) are reported through `exited`.
    for (const pipe of [stdin, stdout, stderr]) pipe.on("error", () => {});
    // "close" fires after stdout is fully read, so every line the agent wrote is delivered before the exit.
    child.once("close", (code, signal) => this.finish({ code, signal }));
    // A grandchild holding stdout open would delay "close" forever: give it a moment, then stop waiting.
    child.once("exit", (code, signal) => {
      setTimeout(() => {
        if (this.exitInfo) return;
        this.signalGroup("SIGKILL");
        this.finish({ code, signal });
      }, 2000).unref();
    });
    return child;
  }

  private outputEnded(onOutputClosed: () => void): void {
    setTimeout(() => {
      const child = this.child;
      if (this.exitInfo || !child || child.exitCode !== null || child.signalCode !== null) return;
      onOutputClosed();
    }, OUTPUT_CLOSED_GRACE_MS).unref();
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get hasExited(): boolean {
    return this.exitInfo !== undefined;
  }

  stderrTail(max?: number): string {
    return this.stderr.tail(max);
  }

  /**
   * Writes one message line. Returns a promise, resolved once the pipe has room again, only when it
   * is full (stdin backpressure); otherwise nothing to wait for.
   */
  write(line: string): Promise<void> | undefined {
    const stdin = this.child?.stdin;
    if (this.exitInfo || !stdin?.writable) return undefined;
    if (stdin.write(line + "\n")) return undefined;
    return new Promise((resolve) => {
      const done = () => {
        stdin.off("drain", done);
        stdin.off("close", done);
        resolve();
      };
      stdin.once("drain", done);
      stdin.once("close", done);
    });
  }

  pauseOutput(): void {
    this.child?.stdout?.pause();
  }

  resumeOutput(): void {
    this.child?.stdout?.resume();
  }

  /** Reads and drops the rest of the agent's output (the connection gave up on it), so it can exit. */
  discardOutput(): void {
    this.discarding = true;
    this.resumeOutput();
  }

  /** Stops the agent gently: stdin closed, then SIGTERM, then SIGKILL, `graceMs` apart, to the whole group. */
  async terminate(graceMs: number): Promise<AgentExit> {
    if (this.exitInfo) return this.exitInfo;
    this.child?.stdin?.end();
    const steps: Array<NodeJS.Signals | undefined> = [undefined, "SIGTERM", "SIGKILL"];
    for (const signal of steps) {
      if (signal) this.signalGroup(signal);
      if (await this.exitsWithin(graceMs)) break;
    }
    // The leader may be gone while helpers it started live on in the group.
    this.signalGroup("SIGKILL");
    return this.exited;
  }

  /**
   * Stops the agent now (server shutdown): SIGTERM at once, SIGKILL after `graceMs`, also when a
   * gentle `terminate` is under way, so the server exits within its supervisor's patience.
   */
  async kill(graceMs: number): Promise<AgentExit> {
    if (this.exitInfo) return this.exitInfo;
    this.child?.stdin?.end();
    this.signalGroup("SIGTERM");
    await this.exitsWithin(graceMs);
    this.signalGroup("SIGKILL");
    return this.exited;
  }

  /** SIGKILL to the group now (a hurried shutdown); `kill`/`terminate` under way then finish at once. */
  hurry(): void {
    if (!this.exitInfo) this.signalGroup("SIGKILL");
  }

  private exitsWithin(ms: number): Promise<boolean> {
    return Promise.race([this.exited.then(() => true), delay(ms).then(() => false)]);
  }

  private signalGroup(signal: NodeJS.Signals): void {
    const pid = this.child?.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, signal);
    } catch {
      // The group is already gone.
    }
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
