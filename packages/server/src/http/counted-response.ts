import { ServerResponse } from "node:http";

/**
 * Monotonic milliseconds. Not `performance.now()`: the first use of the `performance` global loads
 * `perf_hooks` (nine modules, ~0.2 MiB), and the first request every server answers passes here.
 */
export const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/**
 * What the listener's responses (HTTP/1.1 and h2c alike) know of themselves for the access log
 * and the metrics: when the request arrived, and the body bytes handed to `write` and `end`.
 */
export interface CountedBody {
  readonly startedMs: number;
  readonly bodyBytes: number;
}

/** Bytes of a chunk given to `write` or `end` (a callback in its place counts nothing). */
export function chunkBytes(chunk: unknown, encoding: unknown): number {
  if (typeof chunk === "string")
    return Buffer.byteLength(chunk, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8");
  return chunk instanceof Uint8Array ? chunk.byteLength : 0;
}

/**
 * The HTTP/1.1 response class of the listener (node:http's `ServerResponse` option): it counts
 * the body where every body byte passes, `write` and `end` (a `pipeline` into the response calls
 * them too). One class for every response, so the access log needs no per-response wrappers of
 * `write`/`end` (they were three closures and two own properties per request: bench/README.md,
 * "One `close` listener per response"). A write after the end, which node refuses, counts nothing.
 */
export class CountedResponse extends ServerResponse implements CountedBody {
  readonly startedMs = nowMs();
  bodyBytes = 0;

  override write(chunk: unknown, encoding?: unknown, callback?: unknown): boolean {
    if (!this.writableEnded) this.bodyBytes += chunkBytes(chunk, encoding);
    return super.write(chunk, encoding as BufferEncoding, callback as () => void);
  }

  override end(chunk?: unknown, encoding?: unknown, callback?: unknown): this {
    if (typeof chunk !== "function" && !this.writableEnded) this.bodyBytes += chunkBytes(chunk, encoding);
    return super.end(chunk, encoding as BufferEncoding, callback as () => void);
  }
}
