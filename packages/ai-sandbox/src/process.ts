import { spawn as spawnChild, type ChildProcess } from "node:child_process";
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

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

async function waitGone(pgid: number, exited: Promise<unknown>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, ms))]);
  while (groupAlive(pgid) && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, GONE_POLL_MS));
  return !groupAlive(pgid);
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
}

/** Runs `command` with `/bin/sh -c` as the leader of a new process group. */
export async function spawnGroup(command: string, options: GroupSpawnOptions): Promise<SandboxProcess> {
  const child = spawnChild("/bin/sh", ["-c", command], {
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
      signalGroup(pgid, "SIGTERM");
      if (!(await waitGone(pgid, exited, KILL_GRACE_MS))) {
        signalGroup(pgid, "SIGKILL");
        await waitGone(pgid, exited, KILL_GRACE_MS);
      }
      options.onGone?.(pgid);
    })();
    return killing;
  };
  void exited.then(() => {
    if (!groupAlive(pgid)) options.onGone?.(pgid);
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
