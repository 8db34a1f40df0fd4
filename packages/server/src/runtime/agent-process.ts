import { spawn, type ChildProcess } from "node:child_process";
import type { AgentSpec } from "../agents/types.js";
import { LineSplitter } from "./line-splitter.js";
import { TextRing } from "./ring-buffer.js";

export interface AgentExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the process could not be started at all (e.g. ENOENT). */
  spawnError?: string;
  stderrTail: string;
}

export interface AgentProcessOptions {
  env: Record<string, string>;
  cwd?: string;
  maxLineBytes: number;
  onLine: (line: string) => void;
  onOversizeLine: (bytes: number) => void;
  onStderr?: (text: string) => void;
}

const STDERR_RING_CHARS = 64 * 1024;

/**
 * One agent child process speaking NDJSON over stdio, in its own process group so that DELETE
 * and shutdown also reach the helpers it spawned. stderr is always drained into a ring buffer.
 */
export class AgentProcess {
  readonly exited: Promise<AgentExit>;
  private readonly child: ChildProcess;
  private readonly stderr = new TextRing(STDERR_RING_CHARS);
  private exitInfo: AgentExit | undefined;

  constructor(spec: AgentSpec, options: AgentProcessOptions) {
    this.child = spawn(spec.command, spec.args ?? [], {
      cwd: spec.cwd ?? options.cwd,
      env: options.env,
      stdio: ["pipe", "pipe", "pipe"],
      detached: true,
    });
    const splitter = new LineSplitter(options.maxLineBytes, options.onLine, options.onOversizeLine);
    this.child.stdout!.on("data", (chunk: Buffer) => splitter.push(chunk));
    this.child.stderr!.setEncoding("utf8").on("data", (text: string) => {
      this.stderr.push(text);
      options.onStderr?.(text);
    });
    // EPIPE on a dead agent's stdin is reported through `exited`, not as an uncaught error.
    this.child.stdin!.on("error", () => {});
    this.exited = new Promise((resolve) => {
      const finish = (info: Omit<AgentExit, "stderrTail">) => {
        if (this.exitInfo) return;
        this.exitInfo = { ...info, stderrTail: this.stderr.tail(4096) };
        resolve(this.exitInfo);
      };
      this.child.once("error", (error) => finish({ code: null, signal: null, spawnError: error.message }));
      // "close" fires after stdout is fully read, so every line the agent wrote is delivered before the exit.
      this.child.once("close", (code, signal) => finish({ code, signal }));
      // A grandchild holding stdout open would delay "close" forever: give it a moment, then stop waiting.
      this.child.once("exit", (code, signal) => {
        setTimeout(() => {
          if (this.exitInfo) return;
          this.signalGroup("SIGKILL");
          finish({ code, signal });
        }, 2000).unref();
      });
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get hasExited(): boolean {
    return this.exitInfo !== undefined;
  }

  stderrTail(max?: number): string {
    return this.stderr.tail(max);
  }

  /** Writes one message line; resolves once the pipe has room again (stdin backpressure). */
  write(line: string): Promise<void> {
    const stdin = this.child.stdin!;
    if (this.exitInfo || !stdin.writable) return Promise.resolve();
    if (stdin.write(line + "\n")) return Promise.resolve();
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
    this.child.stdout!.pause();
  }

  resumeOutput(): void {
    this.child.stdout!.resume();
  }

  /** Closes stdin, then SIGTERM, then SIGKILL to the whole process group, each after `graceMs`. */
  /** Stops the agent gently: stdin closed, then SIGTERM, then SIGKILL, `graceMs` apart. */
  async terminate(graceMs: number): Promise<AgentExit> {
    if (this.exitInfo) return this.exitInfo;
    this.child.stdin!.end();
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
    this.child.stdin!.end();
    this.signalGroup("SIGTERM");
    await this.exitsWithin(graceMs);
    this.signalGroup("SIGKILL");
    return this.exited;
  }

  private exitsWithin(ms: number): Promise<boolean> {
    return Promise.race([this.exited.then(() => true), delay(ms).then(() => false)]);
  }

  private signalGroup(signal: NodeJS.Signals): void {
    const pid = this.child.pid;
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
