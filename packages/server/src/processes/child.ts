import { spawn, type ChildProcess } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { checkDirectory, resolveCommand, ProcessError } from "./command.js";
import { findTerminal, ptySpawnArgs, signalSession, terminalSession } from "./pty.js";

/** What to start: a program and its arguments (no shell), optionally on a pseudo-terminal. */
export interface ChildSpec {
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  tty?: { cols: number; rows: number };
}

export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** How long output may still arrive after the leader exited before the rest of its group is killed. */
const CLOSE_GRACE_MS = 2_000;

/**
 * A started child in its own process group (and, on a terminal, its own session). `signal`
 * reaches the whole group, and the terminal's session too, so helpers the command started go as well.
 */
export class ChildHandle {
  readonly exited: Promise<ChildExit>;
  private session: number | undefined;

  constructor(
    private readonly child: ChildProcess,
    readonly tty: boolean,
  ) {
    // EPIPE on a dead process' stdin is reported through `exited`, not as an uncaught error.
    child.stdin!.on("error", () => {});
    this.exited = new Promise((resolve) => {
      let exit: ChildExit | undefined;
      const finish = () => resolve(exit ?? { code: child.exitCode, signal: child.signalCode });
      // "close" fires once stdout and stderr are fully read: every byte is in before the exit.
      child.once("close", finish);
      // Something the command left behind may hold the pipes open: give it a moment, then end it.
      child.once("exit", (code, signal) => {
        exit = { code, signal };
        setTimeout(() => {
          this.signal("SIGKILL");
          child.stdout!.destroy();
          child.stderr!.destroy();
          finish();
        }, CLOSE_GRACE_MS).unref();
      });
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  get stdin(): Writable {
    return this.child.stdin!;
  }

  get stdout(): Readable {
    return this.child.stdout!;
  }

  get stderr(): Readable {
    return this.child.stderr!;
  }

  /** Sends `signal` to the process group, and on a terminal to every process of its session. */
  signal(signal: NodeJS.Signals): void {
    if (this.tty) {
      this.session ??= terminalSession(this.pid);
      if (this.session !== undefined) signalSession(this.session, signal);
    }
    try {
      process.kill(-this.pid, signal);
    } catch {
      // The group is gone already.
    }
  }

  /** The terminal's device (`/dev/pts/N`), for resizing. */
  terminalPath(): Promise<string | undefined> {
    return this.tty ? findTerminal(this.pid) : Promise.resolve(undefined);
  }
}

/** Starts `spec`; rejects with a `ProcessError` when the command, its directory or a terminal is missing. */
export async function startChild(spec: ChildSpec): Promise<ChildHandle> {
  checkDirectory(spec.cwd);
  const program = resolveCommand(spec.command, spec.env.PATH ?? "", spec.cwd);
  const [file, args, argv0] = spec.tty
    ? ptySpawnArgs(program, spec.args, spec.tty, spec.env.SHELL)
    : [program, spec.args, spec.command];
  const env = spec.tty ? { ...spec.env, SHELL: "/bin/sh" } : spec.env;
  const child = spawn(file, args, { cwd: spec.cwd, env, argv0, detached: true, stdio: "pipe" });
  await new Promise<void>((resolve, reject) => {
    child.once("spawn", resolve);
    child.once("error", (error: NodeJS.ErrnoException) => reject(spawnFailure(error, spec.command)));
  });
  child.on("error", () => {}); // later errors (signalling a reaped child) surface through `exited`
  return new ChildHandle(child, spec.tty !== undefined);
}

function spawnFailure(error: NodeJS.ErrnoException, command: string): Error {
  if (error.code === "ENOENT")
    return new ProcessError("command-not-found", `Command not found: ${JSON.stringify(command)}.`);
  if (error.code === "EACCES")
    return new ProcessError("not-executable", `${JSON.stringify(command)} is not executable.`);
  return error;
}
