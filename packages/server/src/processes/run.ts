import type { ChildHandle } from "./child.js";

export interface RunOptions {
  /** Written to stdin, which is then closed (closed at once when absent). */
  stdin: Buffer | undefined;
  timeoutMs: number;
  /** Bytes kept per stream; the rest is read and dropped. */
  maxOutputBytes: number;
}

export interface RunOutcome {
  exitCode: number | null;
  signal: string | null;
  stdout: Buffer;
  stderr: Buffer;
  truncated: boolean;
  timedOut: boolean;
  durationMs: number;
}

/** Keeps the first `limit` bytes of a stream and counts the rest. */
class Capture {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  truncated = false;

  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    const room = this.limit - this.size;
    if (chunk.length > room) this.truncated = true;
    if (room <= 0) return;
    const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
    this.chunks.push(kept);
    this.size += kept.length;
  }

  bytes(): Buffer {
    return Buffer.concat(this.chunks, this.size);
  }
}

/**
 * Runs a started child to completion: feeds stdin, captures both streams up to the limit, and
 * kills the whole process group (SIGKILL) when `timeoutMs` passes.
 */
export async function runToCompletion(
  child: ChildHandle,
  options: RunOptions,
  startedAt: number,
): Promise<RunOutcome> {
  const stdout = new Capture(options.maxOutputBytes);
  const stderr = new Capture(options.maxOutputBytes);
  child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
  child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
  child.stdin.end(options.stdin);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.signal("SIGKILL");
  }, options.timeoutMs);
  const { code, signal } = await child.exited.finally(() => clearTimeout(timer));
  return {
    exitCode: code,
    signal,
    stdout: stdout.bytes(),
    stderr: stderr.bytes(),
    truncated: stdout.truncated || stderr.truncated,
    timedOut,
    durationMs: Math.round(performance.now() - startedAt),
  };
}
