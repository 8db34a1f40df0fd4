import { appendFileSync, closeSync, openSync } from "node:fs";
import type { Writable } from "node:stream";

/** Writes `data` to a Node stream, resolving once it is handed to the OS (honours backpressure). */
export function writeAll(out: Writable, data: string | Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    out.write(data, (error) => (error ? reject(error) : resolve()));
  });
}

/**
 * The single writer of stdout: the SDK's ndjson output and raw lines (garbage, vendor updates)
 * both go through `process.stdout.write` with whole lines, so a raw line can never land inside
 * a JSON line.
 */
export function stdoutSink(
  onWrite?: (bytes: number) => void,
  rewrite?: (line: Uint8Array) => Uint8Array,
): WritableStream<Uint8Array> {
  return new WritableStream<Uint8Array>({
    write(chunk) {
      onWrite?.(chunk.byteLength);
      return writeStdout(rewrite ? rewrite(chunk) : chunk);
    },
  });
}

/**
 * `{…}` → `{\r…}`: a bare CR is JSON whitespace between tokens, so the line stays valid JSON and
 * means the same, but a reader that treats CR as a line break (SSE does) would cut it in two.
 */
export function carriageReturnAfterBrace(line: Uint8Array): Uint8Array {
  if (line[0] !== 0x7b) return line;
  const out = new Uint8Array(line.byteLength + 1);
  out[0] = 0x7b;
  out[1] = 0x0d;
  out.set(line.subarray(1), 2);
  return out;
}

/**
 * Closes the real stdout (the reader sees EOF) while the process lives on: fd 1 is closed and
 * /dev/null takes its number (the lowest free one, stdin being open), so later writes go nowhere.
 */
export async function closeStdout(): Promise<void> {
  await flushStdout();
  closeSync(1);
  openSync("/dev/null", "w");
}

export interface StdinOptions {
  /** File to which every raw stdin byte is appended before the SDK parses it. */
  logFile: string | undefined;
  /** Called for every complete input line (used by --stderr-noise). */
  onLine: ((line: string) => void) | undefined;
}

/** stdin as a web ReadableStream, tapped for logging before parsing. */
export function stdinSource(options: StdinOptions): ReadableStream<Uint8Array> {
  let pending = "";
  return new ReadableStream<Uint8Array>({
    start(controller) {
      process.stdin.on("data", (chunk: Buffer) => {
        if (options.logFile) appendFileSync(options.logFile, chunk);
        if (options.onLine) {
          const lines = (pending + chunk.toString("utf8")).split("\n");
          pending = lines.pop() ?? "";
          for (const line of lines) options.onLine(line);
        }
        controller.enqueue(new Uint8Array(chunk));
      });
      process.stdin.on("end", () => controller.close());
      process.stdin.on("error", (error) => controller.error(error));
    },
    cancel() {
      process.stdin.destroy();
    },
  });
}

/** Resolves once everything written to stdout so far has been handed to the OS. */
export function flushStdout(): Promise<void> {
  return writeAll(process.stdout, "");
}

/**
 * Writes to stdout, waiting only if the pipe is full: not waiting for each write's callback keeps
 * the SDK's per-message promise chain short, and waiting for 'drain' keeps memory bounded.
 */
export async function writeStdout(data: string | Uint8Array): Promise<void> {
  if (!process.stdout.write(data)) await new Promise((resolve) => process.stdout.once("drain", resolve));
}

/** Writes `bytes` bytes of filler (64 KiB `x…\n` lines) to stderr, awaiting each piece. */
export async function writeStderr(bytes: number): Promise<void> {
  const piece = 64 * 1024;
  for (let left = bytes; left > 0; left -= piece) {
    await writeAll(process.stderr, "x".repeat(Math.min(left, piece) - 1) + "\n");
  }
}
