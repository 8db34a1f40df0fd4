import type { IncomingMessage, ServerResponse } from "node:http";
import { nowMs, type CountedBody } from "../http/counted-response.js";
import { matchedRoute } from "../http/router.js";
import type { Logger } from "../log.js";
import type { ServerMetrics } from "./metrics.js";

/** The request target without its query, at most 300 characters (no array from `split`). */
function pathOf(target: string): string {
  const query = target.indexOf("?");
  return (query === -1 ? target : target.slice(0, query)).slice(0, 300);
}

const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/**
 * Records one request once its response has closed: one access log line (method, path without
 * the query, status, duration, body bytes sent; at debug, or at warn for a 5xx) and the request
 * metrics. Nothing from headers is logged, so tokens and connection ids never reach the log. A
 * response closed before its headers went out (the client left) counts as status 499. An SSE
 * stream's duration is its lifetime: it is logged but kept out of the latency histogram.
 *
 * `res` is one of the listener's responses (`CountedResponse`, or its h2c twin), which know when
 * they began and the body bytes they were given; the caller runs this from the response's one
 * `close` listener (`InFlight` in server.ts).
 */
export function recordRequest(res: ServerResponse, deps: { logger: Logger; metrics: ServerMetrics }): void {
  const { startedMs, bodyBytes } = res as ServerResponse & CountedBody;
  const seconds = (nowMs() - startedMs) / 1000;
  const req = res.req;
  const status = res.headersSent ? res.statusCode : 499;
  const method = METHODS.has(req.method ?? "") ? req.method! : "OTHER";
  const route = matchedRoute(res) ?? "unmatched";
  const stream = String(res.getHeader("content-type") ?? "").startsWith("text/event-stream");
  const { metrics, logger } = deps;
  const received = Number(req.headers["content-length"]);
  const requestBytes = Number.isSafeInteger(received) && received > 0 ? received : 0;
  metrics.countRequest(method, route, status, stream ? undefined : seconds, bodyBytes, requestBytes);
  // The line is at debug but for a 5xx: its fields are not made when the logger would drop it.
  if (status >= 500 || logger.enabled?.("debug") !== false)
    logRequest(logger, req, status, seconds, bodyBytes);
}

/** The access log line (a function of its own: it stays out of `recordRequest`, which TurboFan compiles). */
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
