import type { IncomingMessage } from "node:http";
import { ProblemError, problems } from "./problem.js";

/**
 * What `readBodyThen` calls once: with the whole body, or with why it could not be read (a
 * `ProblemError`: 413, 400, 499) and no body. It gets the request and the caller's `context` (the
 * response, say) back, so that a request needs no closure of its own.
 */
export type BodyReceiver<T> = (
  req: IncomingMessage,
  context: T,
  body: Buffer | undefined,
  error: unknown,
) => void;

/** A body being read: the request's one record, which the shared listeners below find on it. */
class BodyRead<T> {
  readonly chunks: Buffer[] = [];
  size = 0;

  constructor(
    readonly limit: number,
    readonly then: BodyReceiver<T>,
    readonly context: T,
  ) {}
}

const READING = Symbol("body being read");

/** A request whose body is being read (`readBodyThen`); the record goes once the receiver was called. */
interface Reading extends IncomingMessage {
  [READING]?: BodyRead<unknown> | undefined;
}

/**
 * Reads the whole request body and calls `then` once, failing with 413 as soon as it passes
 * `limit` bytes. The listeners are shared by every request (node calls them with the request as
 * `this`) and find the read on it: no closure and no promise per request, which `readBody`'s
 * promise, its executor and four listener closures were (bench/README.md, "The request path past the router").
 */
export function readBodyThen<T>(
  req: IncomingMessage,
  limit: number,
  then: BodyReceiver<T>,
  context: T,
): void {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit)
    return then(req, context, undefined, problems.tooLarge(limit));
  (req as Reading)[READING] = new BodyRead<unknown>(limit, then as BodyReceiver<unknown>, context);
  // `on`, not `once`: the read is taken off the request when it settles (later events find
  // nothing), and `once` wraps every listener (two more functions of Node's for V8 to run and
  // optimise on each request).
  req.on("data", onBody);
  req.on("end", onBody);
  req.on("error", onBodyError);
  req.on("close", onBodyClose);
}

// Each listener below takes the read off the request before it calls the receiver, so that the
// receiver is called at most once. Written out in each, not a helper: a function called on every
// request is a TurboFan job of its own in a connection's first requests (bench/README.md,
// "The client-request path's compile jobs").

/**
 * The `data` and the `end` listener, one function for both (a chunk, or no argument at the end):
 * as two, each was a TurboFan job of its own in a connection's first requests.
 */
function onBody(this: Reading, chunk?: Buffer): void {
  const read = this[READING];
  if (read === undefined) return;
  if (chunk !== undefined) {
    read.size += chunk.length;
    if (read.size <= read.limit) {
      read.chunks.push(chunk);
      return;
    }
    this[READING] = undefined;
    this.off("data", onBody);
    this.resume(); // discard the rest so the response can still be written
    read.then(this, read.context, undefined, problems.tooLarge(read.limit));
    return;
  }
  this[READING] = undefined;
  const { chunks } = read;
  read.then(this, read.context, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks), undefined);
}

/** The client went away mid-body (node says "aborted"): nobody may hear it, but it is their error. */
function onBodyError(this: Reading, error: Error): void {
  const read = this[READING];
  if (read === undefined) return;
  this[READING] = undefined;
  const problem = problems.badRequest(`The request body could not be read completely (${error.message}).`);
  read.then(this, read.context, undefined, problem);
}

/**
 * A request cut short (client gone, or a request timeout) may end with neither: the handler must
 * not wait for ever. Every request closes, so the error (and its stack trace, ~70 µs) is made
 * only for one that did not end.
 */
function onBodyClose(this: Reading): void {
  const read = this[READING];
  if (this.complete || read === undefined) return;
  this[READING] = undefined;
  const problem = new ProblemError(
    499,
    "client-closed",
    "Client Closed Request",
    "The request body was cut short.",
  );
  read.then(this, read.context, undefined, problem);
}

/** Reads the whole request body, failing with 413 as soon as it passes `limit` bytes (`readBodyThen` as a promise). */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => readBodyThen(req, limit, settleBodyPromise, { resolve, reject }));
}

function settleBodyPromise(
  _req: IncomingMessage,
  promise: { resolve: (body: Buffer) => void; reject: (error: unknown) => void },
  body: Buffer | undefined,
  error: unknown,
): void {
  if (body === undefined) promise.reject(error);
  else promise.resolve(body);
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
