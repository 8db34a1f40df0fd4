import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { Logger } from "../log.js";
import { ProblemError, problems } from "./problem.js";

/** Serves one `upgrade` event of the HTTP server (a WebSocket endpoint). */
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

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
