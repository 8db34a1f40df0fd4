/**
 * Pseudo-terminals through `script(1)` from util-linux, not a native addon.
 *
 * Node has no `openpty`. The usual answer, node-pty, is a C++ addon: it builds from source only
 * where python3, make and a C++ compiler are installed (npm 11 also asks before running install
 * scripts), so `npm ci` on a fresh machine or in a slim image fails or leaves it unbuilt.
 * `script -qfec CMD /dev/null` allocates the terminal, makes it the controlling terminal of a new
 * session, and relays bytes between its stdio pipes and the terminal's master side. It ships with
 * util-linux (Debian's essential `bsdutils`), so it is there wherever the server runs. Measured
 * on the same machine (bench/processes.mjs, keystroke to echo through a pty running `cat`):
 * script p50 0.07 ms, node-pty p50 0.08 ms; a pipe without a terminal 0.04 ms.
 *
 * What it costs: one more process per terminal; the window size is set with `stty` inside the
 * terminal before the command starts, and changed with `stty -F /dev/pts/N` from outside (the
 * kernel then sends SIGWINCH); `script -e` reports a command killed by signal N as exit 128+N.
 */
import { execFile } from "node:child_process";
// `fs.promises` rather than `node:fs/promises`: this module is on the start path, and importing
// that module costs an idle server memory for a directory read it may never do.
import { promises as fsp, readdirSync, readFileSync } from "node:fs";
import { promisify } from "node:util";
import { resolveCommand, ProcessError } from "./command.js";

const run = promisify(execFile);
const SCRIPT = "script";

export interface WindowSize {
  cols: number;
  rows: number;
}

/** `script(1)` arguments that run `program args…` on a new terminal of the given size. */
export function ptySpawnArgs(
  program: string,
  args: readonly string[],
  size: WindowSize,
  shell: string | undefined,
): [string, string[], string] {
  const script = scriptBinary();
  // script runs the line with $SHELL -c; the server sets SHELL=/bin/sh for it and restores the
  // caller's value for the command.
  const restoreShell = shell === undefined ? "unset SHELL" : `export SHELL=${quote(shell)}`;
  const line = [
    `stty rows ${size.rows} cols ${size.cols} 2>/dev/null`,
    restoreShell,
    `exec ${[program, ...args].map(quote).join(" ")}`,
  ].join("; ");
  return [script, ["-qfec", line, "/dev/null"], SCRIPT];
}

let scriptPath: string | undefined;

function scriptBinary(): string {
  try {
    // Looked up once, in the server's PATH; a failed lookup is retried, in case it gets installed.
    scriptPath ??= resolveCommand(SCRIPT, process.env.PATH ?? "/usr/bin:/bin", "/");
    return scriptPath;
  } catch {
    throw new ProcessError(
      "tty-unavailable",
      "Terminals need script(1) from util-linux on the server's PATH (Debian/Ubuntu: bsdutils, Alpine: util-linux-misc).",
    );
  }
}

/** The terminal device `script` (pid) holds, e.g. `/dev/pts/3`. */
export async function findTerminal(pid: number): Promise<string | undefined> {
  const dir = `/proc/${pid}/fd`;
  for (const fd of await fsp.readdir(dir).catch(() => [])) {
    const target = await fsp.readlink(`${dir}/${fd}`).catch(() => "");
    if (target.startsWith("/dev/pts/")) return target;
  }
  return undefined;
}

/** Sets the window size of the terminal at `device`; its foreground process group gets SIGWINCH. */
export async function resizeTerminal(device: string, size: WindowSize): Promise<void> {
  await run("stty", ["-F", device, "rows", String(size.rows), "cols", String(size.cols)], {
    timeout: 5_000,
  });
}

interface ProcStat {
  pid: number;
  ppid: number;
  session: number;
}

/** Every process' parent and session, from `/proc/<pid>/stat`. */
function processTable(): ProcStat[] {
  const table: ProcStat[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let text: string;
    try {
      text = readFileSync(`/proc/${name}/stat`, "latin1");
    } catch {
      continue; // exited meanwhile
    }
    // `pid (comm) state ppid pgrp session …`; comm may contain spaces and parentheses.
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
    table.push({ pid: Number(name), ppid: Number(fields[1]), session: Number(fields[3]) });
  }
  return table;
}

/** The session `script` (pid) started for the command: its child is the session leader. */
export function terminalSession(scriptPid: number): number | undefined {
  return processTable().find((p) => p.ppid === scriptPid)?.session;
}

/**
 * Signals every process of `session`. A shell with job control puts each job in a process group
 * of its own, so signalling the leader's group alone would miss them.
 */
export function signalSession(session: number, signal: NodeJS.Signals): void {
  for (const { pid } of processTable().filter((p) => p.session === session)) {
    try {
      process.kill(pid, signal);
    } catch {
      // exited meanwhile
    }
  }
}

function quote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
