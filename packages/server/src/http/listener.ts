import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import {
  createServer as createHttp2Server,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type ServerHttp2Session,
} from "node:http2";
import type { Socket } from "node:net";
import { answerClientError } from "./client-error.js";
import { problems, sendProblem } from "./problem.js";

declare module "node:http2" {
  // Present at runtime (lib/internal/http2/compat.js) but missing from @types/node 20.
  interface Http2ServerResponse {
    flushHeaders(): void;
  }
}

/** Every handler is written against node:http's request and response types. */
export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => void;

type Listener = (...args: unknown[]) => void;

/**
 * The part of a request the handlers use. HTTP/1.1 requests are this and more; the HTTP/2
 * compatibility request must be assignable to it, which the compiler checks in `serveHttp2`.
 */
export interface HandledRequest {
  readonly headers: IncomingHttpHeaders;
  readonly method?: string;
  readonly url?: string;
  readonly httpVersionMajor: number;
  on(event: string, listener: Listener): unknown;
  once(event: string, listener: Listener): unknown;
  off(event: string, listener: Listener): unknown;
  resume(): unknown;
}

/** The part of a response the handlers use (see `HandledRequest`). */
export interface HandledResponse {
  readonly req: Pick<HandledRequest, "httpVersionMajor">;
  readonly headersSent: boolean;
  readonly writableEnded: boolean;
  readonly writableFinished: boolean;
  writeHead(status: number, headers?: Record<string, string | number>): unknown;
  setHeader(name: string, value: string): unknown;
  flushHeaders(): void;
  write(chunk: string): boolean;
  end(): unknown;
  end(chunk: string): unknown;
  once(event: string, listener: Listener): unknown;
  destroy(): unknown;
}

export interface HttpListener {
  /** The HTTP/1.1 server. It owns the listening socket and hands HTTP/2 connections over. */
  readonly server: Server;
  /** Destroys every connection: HTTP/1.1 ones, HTTP/2 sessions and sockets not yet classified. */
  closeAllConnections(): void;
}

/** RFC 9113 §3.4: a client with prior knowledge starts with this exact sequence. */
const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/**
 * One port, two protocols: HTTP/2 cleartext with prior knowledge (h2c, RFC 9113 §3.3) and
 * HTTP/1.1, told apart by the connection's first bytes and served by the same handler.
 */
export function createHttpListener(handler: RequestHandler): HttpListener {
  // A missing Host is answered as a problem by the security checks, not by node's bare 400.
  const server = createServer({ requireHostHeader: false }, handler);
  server.on("clientError", answerClientError);
  const http2 = createHttp2Server();
  http2.on("request", (req: Http2ServerRequest, res: Http2ServerResponse) => serveHttp2(req, res, handler));
  const sessions = trackSessions(http2, () => server.keepAliveTimeout);
  const unclassified = new Set<Socket>();

  // Take over the HTTP server's own connection listener and call it only for HTTP/1 sockets, so
  // the server keeps listening, counting and timing out its connections exactly as before.
  const [serveHttp1] = server.listeners("connection");
  if (serveHttp1 === undefined) throw new Error("node:http server has no connection listener");
  server.removeListener("connection", serveHttp1 as Listener);
  server.on("connection", (socket: Socket) => {
    unclassified.add(socket);
    socket.once("close", () => unclassified.delete(socket));
    classify(socket, server.headersTimeout, (protocol) => {
      unclassified.delete(socket);
      if (protocol === "h2") {
        http2.emit("connection", socket);
        return;
      }
      Reflect.apply(serveHttp1, server, [socket]);
      // With a 'data' listener node:http reads through the stream instead of consuming the handle
      // directly, so pausing a request (e.g. a slow upload) pauses the socket again: without it a
      // body the handler is not reading yet is buffered whole (seen: 190 MB for a 200 MiB upload).
      socket.on("data", () => {});
      socket.resume();
    });
  });

  return {
    server,
    closeAllConnections: () => {
      for (const socket of unclassified) socket.destroy();
      for (const session of sessions) session.destroy();
      server.closeAllConnections();
    },
  };
}

/**
 * Waits for enough bytes to tell the HTTP/2 preface from anything else (one chunk, unless the
 * preface arrives split), then pushes them back and leaves the socket paused for its server.
 */
function classify(socket: Socket, timeoutMs: number, done: (protocol: "h1" | "h2") => void): void {
  let head: Buffer = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
    const n = Math.min(head.length, PREFACE.length);
    const isPrefix = head.subarray(0, n).equals(PREFACE.subarray(0, n));
    if (isPrefix && head.length < PREFACE.length) return;
    socket.off("data", onData);
    socket.off("error", drop);
    socket.off("timeout", drop);
    socket.setTimeout(0);
    socket.pause();
    socket.unshift(head);
    done(isPrefix ? "h2" : "h1");
  };
  // Nothing has been asked yet, so there is nothing to answer: a silent or failing socket just goes.
  const drop = (): void => {
    socket.destroy();
  };
  socket.on("data", onData);
  socket.once("error", drop);
  socket.once("timeout", drop);
  socket.setTimeout(timeoutMs);
}

/**
 * Tracks live sessions for shutdown and closes a session once it has had no open stream for
 * `idleMs`, as HTTP/1.1 keep-alive does; sessions with an open (SSE) stream stay.
 */
function trackSessions(
  http2: ReturnType<typeof createHttp2Server>,
  idleMs: () => number,
): Set<ServerHttp2Session> {
  const sessions = new Set<ServerHttp2Session>();
  http2.on("session", (session: ServerHttp2Session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    let open = 0;
    session.on("stream", (stream) => {
      open++;
      stream.once("close", () => open--);
    });
    session.setTimeout(idleMs(), () => {
      if (open === 0) session.close();
    });
  });
  return sessions;
}

function serveHttp2(req: Http2ServerRequest, res: Http2ServerResponse, handler: RequestHandler): void {
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
