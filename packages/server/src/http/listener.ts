import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { Socket } from "node:net";
import { answerClientError } from "./client-error.js";
import { CountedResponse } from "./counted-response.js";
import type { H2cServer } from "./h2c.js";
import { SocketLimit } from "./socket-limit.js";

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

export interface ListenerOptions {
  /** Open client sockets at most (see `SocketLimit`). */
  maxSockets: number;
  /** Open streams on one HTTP/2 socket at most (see `h2c.ts`). */
  maxStreamsPerSocket: number;
  /** Time for a new socket's first bytes and for a request's headers. */
  headersTimeoutMs: number;
  /** Time to receive a whole request (headers and body); not the response. */
  requestTimeoutMs: number;
  /** An idle HTTP/1.1 keep-alive socket, or an HTTP/2 session with no open stream, is closed after this. */
  keepAliveTimeoutMs: number;
}

export interface HttpListener {
  /** The HTTP/1.1 server. It owns the listening socket and hands HTTP/2 connections over. */
  readonly server: Server;
  /**
   * Closes every connection: HTTP/1.1 ones and sockets not yet classified at once, HTTP/2 sessions
   * with a GOAWAY (see `H2cServer.closeAll`), destroyed if still open after `h2GraceMs`. An HTTP/2
   * socket still waiting for node:http2 to load is not cut: its client may have sent a request
   * already, so its session is closed the same way once it starts.
   */
  closeAllConnections(h2GraceMs: number): void;
}

/** RFC 9113 §3.4: a client with prior knowledge starts with this exact sequence. */
const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/**
 * One port, two protocols: HTTP/2 cleartext with prior knowledge (h2c, RFC 9113 §3.3) and
 * HTTP/1.1, told apart by the connection's first bytes and served by the same handler.
 */
export function createHttpListener(handler: RequestHandler, options: ListenerOptions): HttpListener {
  const { headersTimeoutMs, requestTimeoutMs } = options;
  // Node 20's requestTimeout runs from a request's first byte until the request (not the response)
  // is fully received, so SSE responses are not cut; it also ends bodies shorter than their
  // Content-Length. Node requires headersTimeout <= requestTimeout.
  const server = createServer(
    {
      headersTimeout: Math.min(headersTimeoutMs, requestTimeoutMs),
      requestTimeout: requestTimeoutMs,
      // How often both are checked (default 30 s, which would let a timeout run late by as much).
      // A missing Host is answered as a problem by the security checks, not by node's bare 400.
      requireHostHeader: false,
      connectionsCheckingInterval: Math.max(100, Math.min(5_000, headersTimeoutMs / 4)),
      // Every response counts its body bytes for the access log and the metrics.
      ServerResponse: CountedResponse as typeof ServerResponse,
    },
    handler,
  );
  server.keepAliveTimeout = options.keepAliveTimeoutMs;
  server.on("clientError", answerClientError);
  // node:http2 (with node:tls and node:crypto: ~10 ms and ~2 MiB) loads with the first h2c connection.
  let h2c: Promise<H2cServer> | undefined;
  const loadH2c = (): Promise<H2cServer> =>
    (h2c ??= import("./h2c.js").then((m) =>
      m.h2cServer(handler, {
        requestTimeoutMs,
        maxStreams: options.maxStreamsPerSocket,
        idleMs: () => server.keepAliveTimeout,
      }),
    ));
  const unclassified = new Set<Socket>();
  const limit = new SocketLimit(options.maxSockets);

  // Take over the HTTP server's own connection listener and call it only for HTTP/1 sockets, so
  // the server keeps listening, counting and timing out its connections exactly as before.
  const [serveHttp1] = server.listeners("connection");
  if (serveHttp1 === undefined) throw new Error("node:http server has no connection listener");
  server.removeListener("connection", serveHttp1 as Listener);
  server.on("connection", (socket: Socket) => {
    const admission = limit.admit(socket);
    if (admission === "drop") {
      socket.destroy();
      return;
    }
    unclassified.add(socket);
    socket.once("close", () => unclassified.delete(socket));
    // A refused socket gets a moment to send its request, so it can be told why.
    const timeoutMs = admission === "refuse" ? Math.min(headersTimeoutMs, 2_000) : headersTimeoutMs;
    classify(socket, timeoutMs, (protocol) => {
      unclassified.delete(socket);
      limit.spoke(socket);
      if (admission === "refuse") return limit.refuse(socket, protocol);
      if (protocol === "h2") {
        // node:http accepts sockets half-open (allowHalfOpen); an HTTP/2 session on one never
        // notices its client left, and its streams (an SSE reader) would stay attached for ever.
        socket.allowHalfOpen = false;
        // While node:http2 loads (the first h2c connection only), the socket waits paused.
        const drop = (): void => {
          socket.destroy();
        };
        socket.once("error", drop);
        loadH2c().then((h2) => {
          socket.off("error", drop);
          if (!socket.destroyed) h2.accept(socket);
        }, drop);
        return;
      }
      Reflect.apply(serveHttp1, server, [socket]);
      pauseStopsReading(socket);
      socket.resume();
    });
  });

  return {
    server,
    closeAllConnections: (h2GraceMs) => {
      for (const socket of unclassified) socket.destroy();
      // Once node:http2 has loaded, for a socket still waiting for it (a failed load dropped them).
      void h2c?.then(
        (h2) => h2.closeAll(h2GraceMs),
        () => undefined,
      );
      server.closeAllConnections();
    },
  };
}

/** The part of a socket's libuv handle that pausing a consumed socket works with. */
interface ReadingHandle {
  reading: boolean;
  readStart(): number;
  readStop(): number;
}

/**
 * node:http reads a socket's bytes natively (its parser consumes the handle; no JS 'data' events,
 * which cost ~10 % of the request path's CPU). A request that is not read (a slow upload) pauses
 * its socket, and node stops the handle only from the socket's 'pause' event, which fires on a
 * flowing → paused transition: when the stream was paused already and a pending `read(0)`
 * restarted the handle, the pause is silent and the body is read into memory without bound (seen:
 * 190 MB for a 200 MiB upload). Here every pause stops the handle, as node's own 'pause' listener
 * does, and every resume starts it again: a stream whose read is pending does not call `_read` on
 * resume, so without this a socket paused and resumed after an upgrade (a WebSocket holding back
 * input while a terminal's pipe drains) would never read again.
 */
function pauseStopsReading(socket: Socket): void {
  const { pause, resume } = socket;
  socket.pause = function (this: Socket) {
    pause.call(this);
    setReading(this, false);
    return this;
  };
  socket.resume = function (this: Socket) {
    resume.call(this);
    setReading(this, true);
    return this;
  };
}

function setReading(socket: Socket, reading: boolean): void {
  const handle = (socket as unknown as { _handle: ReadingHandle | null })._handle;
  if (handle === null || socket.destroyed || handle.reading === reading) return;
  handle.reading = reading;
  if (reading) handle.readStart();
  else handle.readStop();
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
