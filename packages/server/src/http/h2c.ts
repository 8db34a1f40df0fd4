import type { IncomingMessage, ServerResponse } from "node:http";
import {
  constants,
  createServer as createHttp2Server,
  Http2ServerResponse,
  type Http2ServerRequest,
  type Http2Session,
  type ServerHttp2Session,
} from "node:http2";
import type { Socket } from "node:net";
import { chunkBytes, nowMs, type CountedBody } from "./counted-response.js";
import type { HandledRequest, HandledResponse, RequestHandler } from "./listener.js";
import { ProblemError, problems, sendProblem } from "./problem.js";
import { unavailable } from "./unavailable.js";

declare module "node:http2" {
  // Present at runtime (lib/internal/http2/compat.js) but missing from @types/node 20.
  interface Http2ServerResponse {
    flushHeaders(): void;
  }
}

/** The HTTP/2 side of the listener: sockets the listener classified as h2c are handed to it. */
export interface H2cServer {
  accept(socket: Socket): void;
  /**
   * Closes every session (shutdown): a GOAWAY, so that the streams it has taken finish (a 503 being
   * written goes out whole) and a stream it has not taken is refused (REFUSED_STREAM: the client
   * knows it was not processed) rather than cancelled; a session still open after `graceMs` (an SSE
   * stream, a request whose body never comes) is destroyed. A session accepted afterwards (its
   * socket waited for node:http2 to load) is closed the same way as it starts.
   */
  closeAll(graceMs: number): void;
}

export interface H2cOptions {
  /** Time to receive a whole request (headers and body); not the response. */
  requestTimeoutMs: number;
  /**
   * Open streams one socket may have (`limits.maxStreamsPerSocket`). `limits.maxSockets` bounds
   * sockets, not what is multiplexed on one, so a single client could otherwise hold unbounded
   * requests and SSE readers. Past it a stream gets a 503 problem saying to open another
   * connection. It is not advertised as SETTINGS_MAX_CONCURRENT_STREAMS: a client would queue the
   * extra request, and a request queued behind long-lived SSE streams would wait for ever instead
   * of being told why.
   */
  maxStreams: number;
  /** A session with no open stream for this long is closed (the HTTP/1.1 keep-alive timeout). */
  idleMs: () => number;
}

/**
 * `CountedResponse` for h2c: node:http2's compatibility `end(chunk)` writes its chunk with
 * `this.write`, so counting `write` counts every body byte once (and nothing once it is ending).
 */
class CountedHttp2Response extends Http2ServerResponse implements CountedBody {
  readonly startedMs = nowMs();
  bodyBytes = 0;

  override write(chunk: unknown, encoding?: unknown, callback?: unknown): boolean {
    if (!this.writableEnded) this.bodyBytes += chunkBytes(chunk, encoding);
    return super.write(chunk as string, encoding as BufferEncoding, callback as () => void);
  }
}

export function h2cServer(handler: RequestHandler, options: H2cOptions): H2cServer {
  const { requestTimeoutMs, maxStreams, idleMs } = options;
  const http2 = createHttp2Server({ Http2ServerResponse: CountedHttp2Response });
  const open = new WeakMap<Http2Session, number>();
  http2.on("request", (req: Http2ServerRequest, res: Http2ServerResponse) => {
    if ((open.get(req.stream.session!) ?? 0) > maxStreams) refuseStream(res, maxStreams);
    else serveHttp2(req, res, handler, requestTimeoutMs);
  });
  const sessions = trackSessions(http2, idleMs, open);
  let closing: ((session: ServerHttp2Session) => void) | undefined;
  http2.on("session", (session: ServerHttp2Session) => closing?.(session));
  return {
    accept: (socket) => http2.emit("connection", socket),
    closeAll: (graceMs) => {
      closing = (session) => closeWithin(session, graceMs);
      sessions.forEach(closing);
    },
  };
}

/** A GOAWAY now (see `H2cServer.closeAll`), and the session destroyed if still open after `graceMs`. */
function closeWithin(session: ServerHttp2Session, graceMs: number): void {
  session.close();
  const timer = setTimeout(() => session.destroy(), graceMs);
  timer.unref();
  session.once("close", () => clearTimeout(timer));
}

/**
 * Tracks live sessions for shutdown and each one's open streams (in `open`, this stream included
 * when its request is handled), and closes a session once it has had no open stream for `idleMs`,
 * as HTTP/1.1 keep-alive does; sessions with an open (SSE) stream stay.
 */
function trackSessions(
  http2: ReturnType<typeof createHttp2Server>,
  idleMs: () => number,
  open: WeakMap<Http2Session, number>,
): Set<ServerHttp2Session> {
  const sessions = new Set<ServerHttp2Session>();
  http2.on("session", (session: ServerHttp2Session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    open.set(session, 0);
    // Before node:http2's own listener, which turns the stream into a request at once.
    session.prependListener("stream", (stream) => {
      open.set(session, open.get(session)! + 1);
      stream.once("close", () => open.set(session, open.get(session)! - 1));
    });
    session.setTimeout(idleMs(), () => {
      if (open.get(session) === 0) session.close();
    });
  });
  return sessions;
}

/** A stream past `maxStreams`: a 503 problem, and RST_STREAM NO_ERROR so the client sends no body. */
function refuseStream(res: Http2ServerResponse, maxStreams: number): void {
  const problem = unavailable(
    `This HTTP/2 connection has ${maxStreams} open streams, the most the server allows on one ` +
      "(limits.maxStreamsPerSocket); retry once one of them has ended, or open another connection.",
    { limit: maxStreams },
  );
  sendProblem(res as unknown as ServerResponse, problem);
  res.stream.close(constants.NGHTTP2_NO_ERROR);
}

function serveHttp2(
  req: Http2ServerRequest,
  res: Http2ServerResponse,
  handler: RequestHandler,
  requestTimeoutMs: number,
): void {
  boundRequest(req, res, requestTimeoutMs);
  const request: HandledRequest = req;
  const response: HandledResponse = res;
  // The handlers are typed against node:http. The compat objects provide every member they use
  // (listed in HandledRequest/HandledResponse, checked just above), so downcasting is sound.
  const [http1Req, http1Res] = [request as IncomingMessage, response as ServerResponse];
  // RFC 9113 §8.3.1: `:authority` carries what Host carries in HTTP/1.1 (the Host checks read Host).
  const authority = req.headers[":authority"];
  if (authority !== undefined) {
    if (req.headers.host !== undefined && req.headers.host !== authority) {
      sendProblem(http1Res, problems.badRequest("The Host header differs from :authority."));
      return;
    }
    req.headers.host = authority;
  }
  handler(http1Req, http1Res);
}

/**
 * HTTP/2 has no `requestTimeout`: a stream whose request (body included) is not received within
 * `ms` gets a 408 problem, or is reset if its response has begun. A response that has begun (an
 * SSE stream) is not bounded, as with HTTP/1.1.
 */
function boundRequest(req: Http2ServerRequest, res: Http2ServerResponse, ms: number): void {
  if (req.stream.endAfterHeaders) return; // no body: received whole already
  const timer = setTimeout(() => {
    if (req.complete || res.headersSent) return;
    const problem = new ProblemError(
      408,
      "request-timeout",
      "Request Timeout",
      `The request was not received within ${ms} ms (limits.requestTimeoutMs).`,
    );
    sendProblem(res as unknown as ServerResponse, problem);
    // RFC 9113 §8.1: after a complete response, RST_STREAM NO_ERROR stops the client sending the
    // rest; with NO_ERROR Node sends it only once the response is flushed.
    req.stream.close(constants.NGHTTP2_NO_ERROR);
  }, ms);
  timer.unref();
  res.once("close", () => clearTimeout(timer));
  req.once("end", () => clearTimeout(timer));
}
