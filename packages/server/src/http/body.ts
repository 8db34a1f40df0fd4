import type { IncomingMessage } from "node:http";
import { ProblemError, problems } from "./problem.js";

/** Reads the whole request body, failing with 413 as soon as it passes `limit` bytes. */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(problems.tooLarge(limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.off("data", onData);
        req.resume(); // discard the rest so the response can still be written
        reject(problems.tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    // `on`, not `once`: each of these events comes once per request, a second call of resolve or
    // reject would do nothing, and `once` wraps every listener (two more functions of Node's for
    // V8 to run and optimise on each request).
    req.on("data", onData);
    req.on("end", () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    // The client went away mid-body (node says "aborted"): nobody may hear it, but it is their error.
    req.on("error", (error: Error) =>
      reject(problems.badRequest(`The request body could not be read completely (${error.message}).`)),
    );
    // A request cut short (client gone, or a request timeout) may end with neither: the handler must not wait for ever.
    // Every request closes, so the error (and its stack trace, ~70 µs) is made only for one that did not end.
    req.on("close", () => {
      if (!req.complete)
        reject(
          new ProblemError(499, "client-closed", "Client Closed Request", "The request body was cut short."),
        );
    });
  });
}

/** `application/json` with optional parameters, compared case-insensitively. */
export function isJsonContentType(value: string | undefined): boolean {
  // What clients send (every ACP message), told without the trim and the pattern.
  if (value === "application/json") return true;
  return value !== undefined && /^application\/json\s*(;|$)/i.test(value.trim());
}

export function accepts(req: IncomingMessage, mediaType: string): boolean {
  const accept = req.headers.accept;
  if (!accept) return false;
  const [type] = mediaType.split("/");
  return accept
    .split(",")
    .map((part) => part.split(";")[0]!.trim().toLowerCase())
    .some((m) => m === mediaType || m === `${type}/*` || m === "*/*");
}
