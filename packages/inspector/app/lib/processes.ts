import type { CreateOptions, ProcessInfo, Processes } from "sandbox-agent";
import { PolledList } from "./polled.js";
import { ProcessLog } from "./process-log.js";
import type { ServerModel } from "./server.js";

/**
 * An interactive shell: the server's `$SHELL` (processes get it from the server's environment),
 * else `/bin/sh`. `exec` makes the shell itself the process, so stop and exit codes are the shell's.
 */
export const SHELL_COMMAND: Pick<CreateOptions, "command" | "args"> = {
  command: "sh",
  args: ["-c", 'exec "${SHELL:-/bin/sh}"'],
};

/** Splits an argument line like a shell would for words and quotes (no expansion): `-c "a b"` → `["-c", "a b"]`. */
export function splitArgs(line: string): string[] {
  const args: string[] = [];
  for (const [, double, single, plain] of line.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g))
    args.push(double !== undefined ? double.replace(/\\(.)/g, "$1") : (single ?? plain!));
  return args;
}

/** `command arg…` for display, quoting arguments that need it. */
export function commandLine(process: Pick<ProcessInfo, "command" | "args">): string {
  const quote = (arg: string) => (/^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`);
  return [process.command, ...process.args].map(quote).join(" ");
}

export type ProcessAction = "stop" | "kill" | "remove";

/**
 * The server's processes as this page shows them: the list (polled while watched), and one output
 * log per process that stays with the page, so coming back to a process resumes where it left off.
 */
export class ProcessesModel extends PolledList {
  processes: ProcessInfo[] = [];
  private readonly logs = new Map<string, ProcessLog>();

  constructor(readonly server: ServerModel) {
    super();
  }

  get api(): Processes {
    return this.server.control.processes;
  }

  find(id: string): ProcessInfo | undefined {
    return this.processes.find((p) => p.id === id);
  }

  protected async load(): Promise<void> {
    const processes = await this.api.list();
    this.processes = processes.sort((a, b) => b.createdAt.localeCompare(a.createdAt));
    for (const [id, log] of this.logs)
      if (!this.find(id)) {
        log.stop();
        this.logs.delete(id);
      }
  }

  async create(options: CreateOptions): Promise<ProcessInfo> {
    const process = await this.api.create(options);
    this.update(process);
    return process;
  }

  async act(id: string, action: ProcessAction): Promise<void> {
    if (action === "remove") {
      await this.api.remove(id);
      this.logs.get(id)?.stop();
      this.logs.delete(id);
      this.processes = this.processes.filter((p) => p.id !== id);
      this.changed();
    } else {
      this.update(await this.api[action](id));
    }
  }

  /** Writes to a process' stdin; `eof` closes it afterwards. */
  async input(id: string, data: string, eof = false): Promise<void> {
    this.update(await this.api.input(id, data, { eof }));
  }

  /** The output log of a process (created on first use, kept while the process is listed). */
  log(id: string): ProcessLog {
    let log = this.logs.get(id);
    if (!log) {
      // Its output ended with the exit: refresh the row without waiting for the next poll.
      const onExit = () =>
        void this.api.get(id).then(
          (p) => this.update(p),
          () => undefined,
        );
      log = new ProcessLog(this.api, id, onExit);
      this.logs.set(id, log);
    }
    return log;
  }

  private update(process: ProcessInfo): void {
    const index = this.processes.findIndex((p) => p.id === process.id);
    if (index >= 0) this.processes[index] = process;
    else this.processes.unshift(process);
    this.changed();
  }
}
