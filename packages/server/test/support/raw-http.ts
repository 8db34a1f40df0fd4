import { connect } from "node:net";

/** One HTTP/1.1 response read off a raw socket. */
export interface RawResponse {
  status: number;
  headers: Map<string, string>;
  body: Buffer;
  /** False when the connection ended (or was cut by the client) before the body did. */
  complete: boolean;
}

export interface ExchangeOptions {
  /** Give up waiting for the server after this long and judge what arrived. */
  timeoutMs: number;
  /** Half-close after writing (the default), or keep writing side open (an unfinished request). */
  end?: boolean;
  /** Writes the bytes in these pieces, a tick apart (default: one write). */
  pieces?: number;
}

/** Sends raw bytes on a fresh loopback connection and parses every response the server sent. */
export function rawExchange(
  port: number,
  bytes: Buffer | string,
  options: ExchangeOptions,
): Promise<RawResponse[]> {
  const data = typeof bytes === "string" ? Buffer.from(bytes, "latin1") : bytes;
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(parseResponses(Buffer.concat(chunks)));
    };
    const timer = setTimeout(finish, options.timeoutMs);
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", finish); // a reset after the answer: judge what arrived
    socket.on("close", finish);
    socket.once("connect", () => {
      void (async () => {
        const pieces = Math.max(1, options.pieces ?? 1);
        const size = Math.ceil(data.length / pieces);
        for (let at = 0; at < data.length && !socket.destroyed; at += size) {
          socket.write(data.subarray(at, at + size));
          if (pieces > 1) await new Promise((r) => setImmediate(r));
        }
        if (options.end !== false && !socket.destroyed) socket.end();
      })();
    });
  });
}

/** Splits a byte stream into HTTP/1.1 responses (content-length, chunked or close-delimited bodies). */
export function parseResponses(raw: Buffer): RawResponse[] {
  const responses: RawResponse[] = [];
  let at = 0;
  while (at < raw.length) {
    const headEnd = raw.indexOf("\r\n\r\n", at, "latin1");
    if (headEnd < 0) {
      responses.push({ status: -1, headers: new Map(), body: raw.subarray(at), complete: false });
      break;
    }
    const [statusLine = "", ...lines] = raw.subarray(at, headEnd).toString("latin1").split("\r\n");
    const status = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine) ? Number(statusLine.slice(9, 12)) : -1;
    const headers = new Map<string, string>();
    for (const line of lines) {
      const colon = line.indexOf(":");
      headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
    }
    at = headEnd + 4;
    if (status >= 100 && status < 200) continue;
    const { body, next, complete } = readBody(raw, at, headers, status);
    responses.push({ status, headers, body, complete });
    at = next;
  }
  return responses;
}

function readBody(
  raw: Buffer,
  at: number,
  headers: Map<string, string>,
  status: number,
): { body: Buffer; next: number; complete: boolean } {
  if (status === 204 || status === 304) return { body: Buffer.alloc(0), next: at, complete: true };
  if (headers.get("transfer-encoding")?.toLowerCase() === "chunked") {
    const parts: Buffer[] = [];
    let cursor = at;
    for (;;) {
      const lineEnd = raw.indexOf("\r\n", cursor, "latin1");
      if (lineEnd < 0) return { body: Buffer.concat(parts), next: raw.length, complete: false };
      const size = parseInt(raw.subarray(cursor, lineEnd).toString("latin1"), 16);
      if (Number.isNaN(size) || lineEnd + 2 + size + 2 > raw.length)
        return { body: Buffer.concat(parts), next: raw.length, complete: false };
      if (size === 0) return { body: Buffer.concat(parts), next: lineEnd + 4, complete: true };
      parts.push(raw.subarray(lineEnd + 2, lineEnd + 2 + size));
      cursor = lineEnd + 2 + size + 2;
    }
  }
  const length = headers.get("content-length");
  if (length !== undefined) {
    const end = at + Number(length);
    return { body: raw.subarray(at, Math.min(end, raw.length)), next: end, complete: end <= raw.length };
  }
  return { body: raw.subarray(at), next: raw.length, complete: true };
}

/**
 * What is wrong with an error response (not problem+json, or an incomplete problem), if anything.
 * The answer to a HEAD request has the headers of the problem but no body.
 */
export function problemDefect(
  status: number,
  contentType: string | undefined,
  body: Buffer,
  complete: boolean,
  head = false,
): string | undefined {
  if (status < 400) return undefined;
  if (!contentType?.startsWith("application/problem+json")) return `content-type ${contentType ?? "(none)"}`;
  if (head) return undefined;
  if (!complete) return "the problem body was cut short";
  let problem: Record<string, unknown>;
  try {
    problem = JSON.parse(body.toString("utf8")) as Record<string, unknown>;
  } catch {
    return `body is not JSON: ${body.toString("utf8").slice(0, 200)}`;
  }
  for (const field of ["type", "title", "detail"]) {
    if (typeof problem[field] !== "string") return `problem without a string ${field}`;
  }
  if (problem.status !== status) return `problem status ${String(problem.status)} on a ${status}`;
  return undefined;
}
