import { spawn as spawnChild, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import type { SandboxProcess } from "./types.js";

const STDERR_TAIL_BYTES = 64 * 1024;
const KILL_GRACE_MS = 2000;
const GONE_POLL_MS = 25;

/** Keeps the last `limit` bytes written to it (default 64 KiB): stderr tails. */
export class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;

  constructor(private readonly limit: number = STDERR_TAIL_BYTES) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size > this.limit && this.chunks.length > 1) this.size -= this.chunks.shift()?.length ?? 0;
  }

  toString(): string {
    const all = Buffer.concat(this.chunks);
    return all.subarray(Math.max(0, all.length - this.limit)).toString("utf8");
  }
}

interface GroupMember {
  pid: number;
  /** `R`, `S`, … `Z` for a zombie. */
  state: string;
}

/** The members of group `pgid`, from `/proc` (Linux); undefined where there is no `/proc`. */
function groupMembers(pgid: number): GroupMember[] | undefined {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return undefined;
  }
  const members: GroupMember[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "latin1");
      // After the parenthesised name (which may hold spaces and parentheses): state, ppid, pgrp.
      const [state = "", , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(pgrp) === pgid) members.push({ pid: Number(entry), state });
    } catch {
      // Exited since the directory was listed.
    }
  }
  return members;
}

/**
 * Whether a process of group `pgid` still runs. Zombies do not count: a member orphaned to PID 1
 * (bwrap's reaper always is, as bwrap exits before it) stays a zombie until PID 1 reaps it, which
 * some inits do only every second or so and Node as a container's PID 1 never does.
 */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  return groupMembers(pgid)?.some((member) => member.state !== "Z" && member.state !== "X") ?? true;
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

async function waitGone(pgid: number, exited: Promise<unknown> | undefined, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  if (exited) await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, ms))]);
  while (groupAlive(pgid) && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, GONE_POLL_MS));
  return !groupAlive(pgid);
}

/** Signals every member of group `pgid` but its leader. */
function signalFollowers(pgid: number, signal: NodeJS.Signals): void {
  for (const { pid } of groupMembers(pgid) ?? []) {
    if (pid === pgid) continue;
    try {
      process.kill(pid, signal);
    } catch {
      // ESRCH: exited meanwhile.
    }
  }
}

/**
 * SIGTERM a process group, SIGKILL it after a grace period; resolves once it is gone. `exited` is the
 * leader's exit when it is our child (to wake at once), undefined for a group of another process.
 * `spareLeader`: the leader is a launcher (bwrap) that would SIGKILL its command at once on SIGTERM,
 * so SIGTERM goes to the other members only; SIGKILL still reaches the whole group.
 */
export async function stopGroup(pgid: number, exited?: Promise<unknown>, spareLeader = false): Promise<void> {
  if (spareLeader) signalFollowers(pgid, "SIGTERM");
  else signalGroup(pgid, "SIGTERM");
  if (!(await waitGone(pgid, exited, KILL_GRACE_MS))) {
    signalGroup(pgid, "SIGKILL");
    await waitGone(pgid, exited, KILL_GRACE_MS);
  }
}

/** SIGKILL a process group synchronously; for `process.on('exit')` cleanup. */
export function killGroupSync(pgid: number): void {
  signalGroup(pgid, "SIGKILL");
}

function waitSpawned(child: ChildProcess, command: string): Promise<void> {
  return new Promise((resolve, reject) => {
    child.once("spawn", () => resolve());
    child.once("error", (error) =>
      reject(new Error(`sandbox spawn failed for "${command}": ${error.message}`)),
    );
  });
}

export interface GroupSpawnOptions {
  cwd: string;
  env: Record<string, string>;
  /** Called once the process group is gone, to stop tracking it. */
  onGone?: (pgid: number) => void;
  /**
   * A program (and its arguments) that runs `/bin/sh -c command` for us: bubblewrap. It leads the
   * group and is spared the graceful SIGTERM, which goes to the other members only: bwrap dies of
   * SIGTERM and its `--die-with-parent` would then SIGKILL the sandbox at once, leaving the command
   * no grace period. The SIGKILL that follows the grace period still goes to the whole group.
   * The launcher must take every process of the command down when it exits (bwrap does, with a
   * PID namespace and `--die-with-parent`).
   */
  launcher?: readonly string[];
}

/** Runs `command` with `/bin/sh -c` (through `launcher` if given) as the leader of a new process group. */
export async function spawnGroup(command: string, options: GroupSpawnOptions): Promise<SandboxProcess> {
  const shell = ["/bin/sh", "-c", command];
  const [file, ...args] = options.launcher === undefined ? shell : [...options.launcher, ...shell];
  const child = spawnChild(file as string, args, {
    cwd: options.cwd,
    env: options.env,
    detached: true,
    stdio: ["pipe", "pipe", "pipe"],
  });
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal }));
  });
  await waitSpawned(child, command);
  // Later errors (e.g. signalling a reaped child) surface through `exited`/`kill`, not as crashes.
  child.on("error", () => undefined);
  const pgid = child.pid as number;
  const tail = new TailBuffer();
  child.stderr?.on("data", (chunk: Buffer) => tail.push(chunk));
  // A reader closing stdin early must not crash the host with EPIPE.
  child.stdin?.on("error", () => undefined);
  let killing: Promise<void> | undefined;
  const kill = (): Promise<void> => {
    killing ??= (async () => {
      await stopGroup(pgid, exited, options.launcher !== undefined);
      options.onGone?.(pgid);
    })();
    return killing;
  };
  // A launcher takes everything down with it, so its exit ends the group; sparing the /proc scan
  // of `groupAlive` here matters, as bwrap's reaper is a zombie member until PID 1 reaps it.
  void exited.then(() => {
    if (options.launcher !== undefined || !groupAlive(pgid)) options.onGone?.(pgid);
  });
  return {
    pid: pgid,
    stdin: Writable.toWeb(child.stdin as Writable) as WritableStream<Uint8Array>,
    stdout: Readable.toWeb(child.stdout as Readable) as ReadableStream<Uint8Array>,
    stderrTail: () => tail.toString(),
    exited,
    kill,
  };
}
