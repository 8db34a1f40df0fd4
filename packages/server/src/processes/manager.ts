import { TicketBook } from "../http/tickets.js";
import path from "node:path";
import type { Logger } from "../log.js";
import { baseEnvironment } from "../agents/env.js";
import { startChild, type ChildHandle } from "./child.js";
import { ProcessError } from "./command.js";
import { DEFAULT_PROCESS_LIMITS, type ProcessLimits } from "./limits.js";
import { ManagedProcess, type ProcessSource } from "./managed-process.js";
import type { WindowSize } from "./pty.js";
import { runToCompletion, type RunOutcome } from "./run.js";

export interface ProcessManagerOptions {
  /** Working directory of processes that name none (and base of relative ones). */
  workdir: string;
  limits?: Partial<ProcessLimits>;
  logger: Logger;
}

/** What to start; `cwd` is relative to the workdir, `env` is added to the base environment. */
export interface StartRequest {
  command: string;
  args?: string[];
  cwd?: string;
  env?: Record<string, string>;
}

export interface CreateRequest extends StartRequest {
  tty?: WindowSize;
  source?: ProcessSource;
}

export interface RunRequest extends StartRequest {
  stdin?: Buffer;
  timeoutMs?: number;
  maxOutputBytes?: number;
}

/** Terminals get a colour-capable `TERM` unless the request sets one. */
const TERMINAL_TERM = "xterm-256color";

/**
 * Every process started through the process API (and ACP terminals): limits, lookup, terminal
 * tickets, and stopping them all when the server shuts down.
 */
export class ProcessManager {
  readonly limits: ProcessLimits;
  private readonly processes = new Map<string, ManagedProcess>();
  /** Children of `run` requests: not listed, but counted and stopped on shutdown. */
  private readonly runs = new Set<ChildHandle>();
  private readonly tickets: TicketBook;
  private running = 0;
  private closed = false;

  constructor(private readonly options: ProcessManagerOptions) {
    this.limits = { ...DEFAULT_PROCESS_LIMITS, ...options.limits };
    this.tickets = new TicketBook(this.limits.ticketTtlMs);
  }

  /** Starts a background process (on a terminal with `tty`). */
  async create(request: CreateRequest): Promise<ManagedProcess> {
    const { child, cwd } = await this.start(request, request.tty);
    const proc = new ManagedProcess(
      {
        command: request.command,
        args: request.args ?? [],
        cwd,
        tty: request.tty,
        source: request.source ?? "api",
      },
      child,
      this.limits.maxLogBytes,
    );
    this.processes.set(proc.id, proc);
    void proc.exited.then(() => {
      this.running--;
      this.forgetOldExited();
    });
    this.options.logger.info("process started", { process: proc.id.slice(0, 8), command: request.command });
    return proc;
  }

  /** Runs a command to completion and returns its output. */
  async run(request: RunRequest): Promise<RunOutcome> {
    const startedAt = performance.now();
    const { child } = await this.start(request, undefined);
    this.runs.add(child);
    try {
      return await runToCompletion(
        child,
        {
          stdin: request.stdin,
          timeoutMs: request.timeoutMs ?? this.limits.runTimeoutMs,
          maxOutputBytes: request.maxOutputBytes ?? this.limits.runOutputBytes,
        },
        startedAt,
      );
    } finally {
      this.runs.delete(child);
      this.running--;
    }
  }

  /** Processes running now: background, terminals, `run` and ACP terminals. */
  get runningCount(): number {
    return this.running;
  }

  get(id: string): ManagedProcess {
    const proc = this.processes.get(id);
    if (!proc) throw new ProcessError("unknown-process", `No process ${id} (never started, or deleted).`);
    return proc;
  }

  list(): ManagedProcess[] {
    return [...this.processes.values()];
  }

  /** Kills the process if it still runs and forgets it. */
  async remove(id: string): Promise<void> {
    const proc = this.get(id);
    await proc.kill();
    this.processes.delete(id);
  }

  /** A single-use ticket that authenticates one WebSocket upgrade to the process' terminal. */
  issueTicket(id: string): { ticket: string; expiresAt: string } {
    return this.tickets.issue(this.get(id).id);
  }

  /** Consumes `ticket`: true when it was issued for process `id` and has not expired. */
  redeemTicket(ticket: string, id: string): boolean {
    return this.tickets.redeem(ticket, id);
  }

  /** Server shutdown: stops every process (SIGTERM, SIGKILL after the grace) and waits for them. */
  async shutdown(): Promise<void> {
    this.closed = true;
    const grace = this.limits.killGraceMs;
    const stops: Promise<unknown>[] = this.list().map((proc) => proc.stop(grace));
    for (const child of this.runs) {
      child.signal("SIGTERM");
      setTimeout(() => child.signal("SIGKILL"), grace).unref();
      stops.push(child.exited);
    }
    await Promise.all(stops);
  }

  private async start(request: StartRequest, tty: WindowSize | undefined) {
    if (this.closed) throw new ProcessError("shutting-down", "The server is shutting down.");
    if (this.running >= this.limits.maxProcesses) {
      throw new ProcessError(
        "too-many-processes",
        `${this.running} processes are running, the limit (maxProcesses) is ${this.limits.maxProcesses}; stop one or wait.`,
      );
    }
    const cwd = path.resolve(this.options.workdir, request.cwd ?? ".");
    const env = {
      ...baseEnvironment(process.env),
      ...(tty ? { TERM: TERMINAL_TERM } : {}),
      ...request.env,
    };
    this.running++;
    try {
      const child = await startChild({ command: request.command, args: request.args ?? [], cwd, env, tty });
      return { child, cwd };
    } catch (error) {
      this.running--;
      throw error;
    }
  }

  /** Keeps at most `maxExitedProcesses` exited processes (and their logs), dropping the oldest. */
  private forgetOldExited(): void {
    const exited = this.list().filter((p) => !p.running);
    for (const proc of exited.slice(0, Math.max(0, exited.length - this.limits.maxExitedProcesses)))
      this.processes.delete(proc.id);
  }
}
