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
