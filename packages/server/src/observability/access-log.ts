import type { IncomingMessage, ServerResponse } from "node:http";
import { matchedRoute } from "../http/router.js";
import type { Logger } from "../log.js";
import type { ServerMetrics } from "./metrics.js";

/**
 * Monotonic milliseconds. Not `performance.now()`: the first use of the `performance` global loads
 * `perf_hooks` (nine modules, ~0.2 MiB), and the first request every server answers passes here.
 */
const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/** The request target without its query, at most 300 characters (no array from `split`). */
function pathOf(target: string): string {
  const query = target.indexOf("?");
  return (query === -1 ? target : target.slice(0, query)).slice(0, 300);
}

const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/**
 * Watches one request to its end: one access log line (method, path without the query, status,
 * duration, bytes sent; at debug, or at warn for a 5xx) and the request metrics. Nothing from
 * headers is logged, so tokens and connection ids never reach the log. A response closed before
 * its headers went out (the client left) counts as status 499. An SSE stream's duration is its
 * lifetime: it is logged but kept out of the latency histogram.
 */
export function observeRequest(
  req: IncomingMessage,
  res: ServerResponse,
  deps: { logger: Logger; metrics: ServerMetrics },
): void {
  const started = nowMs();
  let bytes = 0;
  const count = (chunk: unknown, encoding: unknown) => {
    if (typeof chunk === "string")
      bytes += Buffer.byteLength(chunk, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8");
    else if (chunk instanceof Uint8Array) bytes += chunk.byteLength;
  };
  const { write, end } = res;
  res.write = function (this: ServerResponse, chunk: unknown, ...rest: unknown[]) {
    count(chunk, rest[0]);
    return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
  } as typeof res.write;
  res.end = function (this: ServerResponse, chunk?: unknown, ...rest: unknown[]) {
    if (typeof chunk !== "function") count(chunk, rest[0]);
    return (end as (...args: unknown[]) => ServerResponse).call(this, chunk, ...rest);
  } as typeof res.end;
  // `on`, not `once`: a response closes once (see `InFlight.track` in server.ts).
  res.on("close", () => {
    const seconds = (nowMs() - started) / 1000;
    const status = res.headersSent ? res.statusCode : 499;
    const method = METHODS.has(req.method ?? "") ? req.method! : "OTHER";
    const route = matchedRoute(res) ?? "unmatched";
    const stream = String(res.getHeader("content-type") ?? "").startsWith("text/event-stream");
    const { metrics, logger } = deps;
    metrics.requests.inc({ method, route, status: String(status) });
    if (!stream) metrics.requestSeconds.observe({ method, route }, seconds);
    metrics.responseBytes.inc({ method, route }, bytes);
    const received = Number(req.headers["content-length"]);
    if (Number.isSafeInteger(received) && received > 0) metrics.requestBytes.inc({ method, route }, received);
    logRequest(logger, req, status, seconds, bytes);
  });
}

/** The access log line (a function of its own: it stays out of the close listener TurboFan compiles). */
function logRequest(
  logger: Logger,
  req: IncomingMessage,
  status: number,
  seconds: number,
  bytes: number,
): void {
  const fields = {
    method: req.method,
    path: pathOf(req.url ?? ""),
    status,
    durationMs: Math.round(seconds * 1000 * 10) / 10,
    bytes,
  };
  if (status >= 500) logger.warn("request", fields);
  else logger.debug("request", fields);
}
