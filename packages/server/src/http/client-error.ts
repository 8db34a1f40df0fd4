import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import { ProblemError } from "./problem.js";

/** What node:http passes to `clientError`: a parser error (`HPE_*`), a timeout or a socket error. */
export type ClientError = Error & { code?: string; reason?: string };

type InFlight = { _httpMessage?: { headersSent?: boolean } | null };

/**
 * Answers requests node:http could not parse (malformed request line, bad header or chunking,
 * headers over the limit, a request that took too long) with a problem+json response instead of
 * node's bare status line, then closes the connection: after a parse error nothing more on it can
 * be trusted. Socket errors (a reset, a broken pipe) have nobody to answer and just close it.
 * Installed as the HTTP/1.1 server's `clientError` listener.
 */
export function answerClientError(error: ClientError, socket: Duplex): void {
  const problem = problemFor(error);
  // As node itself does: never write into a response that is already under way (e.g. an SSE
  // stream whose pipelined follower could not be parsed), only onto a quiet connection.
  const inFlight = (socket as Duplex & InFlight)._httpMessage;
  if (problem === undefined || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify(problem.problem);
  const head =
    `HTTP/1.1 ${problem.problem.status} ${STATUS_CODES[problem.problem.status]}\r\n` +
    "Content-Type: application/problem+json\r\n" +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    "Connection: close\r\n\r\n";
  socket.end(head + body, () => socket.destroy());
}

function problemFor(error: ClientError): ProblemError | undefined {
  const code = error.code ?? "";
  const reason = error.reason ?? error.message;
  if (code === "ERR_HTTP_REQUEST_TIMEOUT") {
    return new ProblemError(
      408,
      "request-timeout",
      "Request Timeout",
      "The request was not received in time; the connection is closed.",
    );
  }
  if (!code.startsWith("HPE_")) return undefined;
  if (code === "HPE_HEADER_OVERFLOW") {
    return new ProblemError(
      431,
      "header-fields-too-large",
      "Request Header Fields Too Large",
      "The request headers are too large; send fewer or smaller headers.",
    );
  }
  if (code === "HPE_CHUNK_EXTENSIONS_OVERFLOW") {
    return new ProblemError(
      413,
      "payload-too-large",
      "Payload Too Large",
      "The chunk extensions of the request body are too large.",
    );
  }
  return new ProblemError(
    400,
    "bad-request",
    "Bad Request",
    `The request is not valid HTTP/1.1 (${reason}, ${code}); the connection is closed.`,
  );
}
