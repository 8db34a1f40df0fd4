import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { Logger } from "../log.js";
import { ProblemError, problems } from "./problem.js";
import { checkHost, checkOrigin, hasBearerToken, type SecurityOptions } from "./security.js";

/** Serves one `upgrade` event of the HTTP server (a WebSocket endpoint). */
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

/**
 * The checks of every WebSocket upgrade: Host and Origin as for every request, then
 * `Authorization: Bearer` (Node clients) or a single-use `?ticket=` (browsers, which cannot set
 * headers on a WebSocket), which `redeem` consumes. Throws the problem to refuse with.
 */
export function checkUpgrade(
  req: IncomingMessage,
  url: URL,
  security: SecurityOptions,
  redeem: (ticket: string) => boolean,
): void {
  checkHandshake(req);
  checkHost(req, security);
  checkOrigin(req, security);
  const ticket = url.searchParams.get("ticket");
  if (ticket === null ? hasBearerToken(req, security) : redeem(ticket)) return;
  throw ticket === null
    ? problems.unauthorized()
    : new ProblemError(
        401,
        "unauthorized",
        "Unauthorized",
        "The ticket is unknown, used or expired; get a new one.",
      );
}

/**
 * What `ws` checks before accepting (RFC 6455 §4.2.1), checked first so that a malformed or
 * non-WebSocket upgrade (e.g. `Upgrade: h2c`) gets a problem+json answer, not `ws`'s HTML one.
 */
function checkHandshake(req: IncomingMessage): void {
  if (req.method !== "GET") {
    throw new ProblemError(
      405,
      "method-not-allowed",
      "Method Not Allowed",
      "A WebSocket upgrade is a GET.",
      {},
      {
        allow: "GET",
      },
    );
  }
  if (req.headers.upgrade?.toLowerCase() !== "websocket")
    throw problems.badRequest(
      `Upgrade must be "websocket" here (got ${JSON.stringify(req.headers.upgrade ?? "")}).`,
    );
  if (!/^[+/0-9A-Za-z]{22}==$/.test(req.headers["sec-websocket-key"] ?? ""))
    throw problems.badRequest("Sec-WebSocket-Key is missing or not a base64 16-byte nonce.");
  const version = req.headers["sec-websocket-version"];
  if (version !== "13" && version !== "8") {
    throw new ProblemError(
      426,
      "upgrade-required",
      "Upgrade Required",
      "Sec-WebSocket-Version must be 13.",
      {},
      { "sec-websocket-version": "13" },
    );
  }
}

/** Answers a refused upgrade with a plain HTTP problem response and closes the socket. */
export function refuseUpgrade(socket: Duplex, error: unknown, logger: Logger): void {
  const problem =
    error instanceof ProblemError
      ? error
      : problems.internal(error instanceof Error ? error.message : String(error));
  if (!(error instanceof ProblemError)) logger.error("upgrade failed", { error: String(error) });
  const body = JSON.stringify(problem.problem);
  const headers = {
    ...problem.headers,
    "content-type": "application/problem+json",
    "content-length": String(Buffer.byteLength(body)),
    connection: "close",
  };
  const head = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("");
  socket.end(`HTTP/1.1 ${problem.problem.status} ${problem.problem.title}\r\n${head}\r\n${body}`);
}
