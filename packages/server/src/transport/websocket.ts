/**
 * The WebSocket transport of `/v2/rpc`: the same connections as HTTP + SSE (same ids, extensions,
 * metadata, event log), one JSON-RPC message per text frame in each direction. The shape follows
 * the ACP remote-transport draft and the ACP SDK's `createWebSocketStream` client:
 *
 * - A new socket (no connection id) must send `initialize` first; the 101 response names the
 *   connection (`Acp-Connection-Id`) and the initialize result carries it too, with the event id
 *   the stream starts after (`_meta["sandboxagent.dev"].connection`), for browsers, which cannot
 *   read the 101's headers.
 * - The n-th frame after that point is event `<epoch>.<start + n>`, so a client that counts frames
 *   resumes after a dropped socket by upgrading with the connection id and the last event id it
 *   got (`Acp-Connection-Id`/`Last-Event-ID` headers or `?connectionId=`/`?lastEventId=`): the
 *   events it missed are replayed first, none lost, none twice.
 * - Client messages are acknowledged without a frame per message: a client that asks for it
 *   (`?acks=1`, advertised as `acks: true` next to the connection id) gets, as the first frame of
 *   every resumed socket, a `_sandboxagent/transport/resumed` notification that is no event (not
 *   counted): how many of its messages this server process has handled on the connection
 *   (`received`, or null when this process never saw the connection: it restarted) and the event
 *   id of the log's head. The client re-sends the messages after `received`, in order. A first
 *   frame rather than a header of the 101: browsers cannot read the 101's headers.
 * - A client's deliberate close (code 1000 or none) ends the connection, as `DELETE` does; a dropped
 *   socket does not, so that the client may resume (the idle timeout ends it otherwise).
 * - Upgrades pass the Host and Origin checks of every request, and authenticate with
 *   `Authorization: Bearer` or a single-use `?ticket=` from `POST /v2/rpc/ticket` (browsers), never
 *   with the token in the URL.
 */
import { nodeCrypto } from "../lazy-builtins.js";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { WebSocketServer, type RawData, type WebSocket } from "ws";
import { objectAt } from "../extensions/advertise.js";
import { ProblemError, problems } from "../http/problem.js";
import type { SecurityOptions } from "../http/security.js";
import type { TicketBook } from "../http/tickets.js";
import { checkUpgrade, refuseUpgrade } from "../http/upgrade.js";
import { shortId } from "../log.js";
import {
  errorResponse,
  isObject,
  kindOf,
  META_KEY,
  type JsonRpcId,
  type JsonRpcMessage,
} from "../protocol.js";
import {
  AgentUnavailableError,
  batchLength,
  eventBytes,
  NotRecordedError,
  type Connection,
  type OutboundReader,
} from "../runtime/connection.js";
import { endedProblem, lookup, notRecordedData, startConnection, type RpcDeps } from "./connect.js";
import { cursorOf, eventId } from "./event-ids.js";
import { connectionIdHeaders, connectionIdOf, lastEventIdOf } from "./headers.js";
import { readMessage } from "./envelope.js";
import { WRITE_BATCH_BYTES } from "./sse.js";

export interface RpcSocketDeps extends RpcDeps {
  security: SecurityOptions;
  tickets: TicketBook;
  /** The path tickets are issued for (`/v2/rpc`). */
  path: string;
}

/** Unsent bytes on a socket past which no more events are read from the log until it drains. */
const HIGH_WATER_BYTES = 1024 * 1024;
/** Client frames waiting to be handled past which the socket is no longer read. */
const MAX_WAITING_FRAMES = 64;
/** How long a peer has to answer the close handshake. */
const CLOSE_TIMEOUT_MS = 1_000;
/** Events go out as text frames, also when sent as bytes. */
const TEXT_FRAME = { binary: false } as const;

/**
 * Close codes. 1000: the connection ended and every event was delivered; 1012 (service restart):
 * the server is stopping, and its connections survive it in the event log, so a client resumes
 * after the restart (1001, going away, would tell clients the connection is over);
 * 4000 + an HTTP status: why the connection is unusable (4409: another socket took the stream
 * over; 4410: the connection is closed; 4xxx/45xx: initialize failed with that problem).
 */
export const CLOSE = { ended: 1000, shutdown: 1012, policy: 1008, replaced: 4409, gone: 4410 } as const;

/** The notification that opens a resumed socket of a client that asked for acknowledgements. */
export const RESUMED_METHOD = "_sandboxagent/transport/resumed";

/**
 * The client messages of one connection, across its sockets: handled one after the other in
 * arrival order, counted, and read from one socket only (the latest: a resume takes over).
 */
interface Inbound {
  chain: Promise<void>;
  /** Messages handled since initialize (the client numbers its messages the same way). */
  received: number;
  owner: RpcSocket;
}

/**
 * Per connection, in memory: a restarted server has no count, and says so (`received: null`).
 * A WeakMap so that it goes with the connection.
 */
const inbounds = new WeakMap<Connection, Inbound>();

export interface RpcSocketServer {
  handle(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Server shutdown: closes the sockets that have no connection yet. */
  close(): void;
}

export function rpcSocketServer(deps: RpcSocketDeps): RpcSocketServer {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: deps.limits.maxBodyBytes,
    perMessageDeflate: false,
  });
  const named = new WeakMap<IncomingMessage, string>();
  const sockets = new Set<RpcSocket>();
  // The 101 names a new connection, as the ACP SDK's upgrade handler does.
  wss.on("headers", (headers, req) => {
    const id = named.get(req);
    if (id === undefined) return;
    for (const [name, value] of Object.entries(connectionIdHeaders(id))) headers.push(`${name}: ${value}`);
  });
  return {
    handle(req, socket, head) {
      try {
        const admitted = admit(req, deps);
        // A new connection's id is named by the 101, before its `initialize` creates it. (node:crypto
        // through the server's lazy loader, as everywhere; the 101's accept-key hash is ws's.)
        const id = admitted.conn?.id ?? nodeCrypto().randomUUID();
        if (!admitted.conn) named.set(req, id);
        wss.handleUpgrade(req, socket, head, (ws) => {
          const rpcSocket = new RpcSocket(ws, socket, deps, id, admitted);
          sockets.add(rpcSocket);
          ws.once("close", () => sockets.delete(rpcSocket));
        });
      } catch (error) {
        refuseUpgrade(socket, error, deps.logger);
      }
    },
    close() {
      // Sockets of a connection close once it has delivered what the shutdown tells them.
      for (const rpcSocket of sockets)
        if (!rpcSocket.started) rpcSocket.closeWith(CLOSE.shutdown, "server shutting down");
    },
  };
}

interface Admitted {
  /** The connection a resuming socket names; none for a new one. */
  conn?: Connection;
  cursor?: number;
  /** The client counts its messages and wants the count on each resume. */
  acks: boolean;
}

function admit(req: IncomingMessage, deps: RpcSocketDeps): Admitted {
  const url = new URL(req.url ?? "/", "http://localhost");
  checkUpgrade(req, url, deps.security, (ticket) => deps.tickets.redeem(ticket, deps.path));
  const id = connectionIdOf(req) ?? url.searchParams.get("connectionId") ?? undefined;
  const acks = url.searchParams.get("acks") === "1";
  if (id === undefined) return { acks };
  const conn = lookup(deps, id);
  const cursor = cursorOf(conn, lastEventIdOf(req) ?? url.searchParams.get("lastEventId") ?? undefined);
  if (conn.drained(cursor)) throw endedProblem(conn, " Every event was delivered.");
  if (cursor === undefined && conn.hasReader) {
    throw problems.conflict("Another reader is attached; reconnect with Last-Event-ID to take over.");
  }
  return { conn, cursor, acks };
}

/** One socket: client frames into the connection, the connection's events out as frames. */
class RpcSocket {
  private conn: Connection | undefined;
  private reader: OutboundReader | undefined;
  /** Frames before the connection exists (the initialize), in arrival order. */
  private preface: Promise<void> = Promise.resolve();
  private waiting = 0;
  private readonly abort = new AbortController();
  private closedByServer = false;
  private alive = true;
  private readonly heartbeat: NodeJS.Timeout;
  private readonly firstFrame: NodeJS.Timeout | undefined;

  constructor(
    private readonly ws: WebSocket,
    /** The upgraded TCP socket under `ws`, corked while a batch is framed. */
    private readonly socket: Duplex,
    private readonly deps: RpcSocketDeps,
    private readonly id: string,
    admitted: Admitted,
  ) {
    ws.on("message", (data, isBinary) => this.onFrame(data, isBinary));
    ws.on("error", () => ws.terminate());
    ws.on("pong", () => (this.alive = true));
    ws.once("close", (code) => this.onClose(code));
    // A peer that stops answering pings is gone: its reader is released for a resume.
    this.heartbeat = setInterval(() => {
      if (!this.alive) return ws.terminate();
      this.alive = false;
      ws.ping();
    }, deps.limits.keepAliveMs).unref();
    if (admitted.conn) this.resume(admitted.conn, admitted.cursor, admitted.acks);
    else
      this.firstFrame = setTimeout(
        () => this.closeWith(CLOSE.policy, "no initialize received"),
        deps.limits.headersTimeoutMs,
      ).unref();
  }

  private onFrame(data: RawData, isBinary: boolean): void {
    if (isBinary) return this.reply(undefined, -32600, "Send JSON-RPC messages as text frames.");
    const bytes = Buffer.isBuffer(data)
      ? data
      : Buffer.concat(Array.isArray(data) ? data : [Buffer.from(data)]);
    if (++this.waiting === MAX_WAITING_FRAMES) this.ws.pause();
    const inbound = this.conn && inbounds.get(this.conn);
    const next = (inbound?.chain ?? this.preface)
      .then(() => this.handle(bytes))
      .catch((error: unknown) => {
        this.deps.logger.error("WebSocket frame failed", {
          connection: shortId(this.id),
          error: String(error),
        });
        this.closeWith(1011, "internal error");
      })
      .finally(() => {
        if (this.waiting-- === MAX_WAITING_FRAMES) this.ws.resume();
      });
    if (inbound) inbound.chain = next;
    else this.preface = next;
  }

  /** Whether the socket is bound to a connection (initialize succeeded, or it resumed one). */
  get started(): boolean {
    return this.conn !== undefined;
  }

  private async handle(bytes: Buffer): Promise<void> {
    if (this.ws.readyState !== this.ws.OPEN) return;
    let message: JsonRpcMessage;
    let line: string;
    try {
      ({ message, line } = readMessage(bytes, this.conn));
    } catch (error) {
      if (!(error instanceof ProblemError)) throw error;
      const rpc = error.problem.jsonrpcError as { code: number } | undefined;
      return this.reply(undefined, rpc?.code ?? -32600, error.problem.detail);
    }
    const conn = this.conn;
    if (!conn) return this.initialize(message, line);
    const inbound = inbounds.get(conn);
    // A socket that another resumed has no say any more: its client sends the message again there.
    if (inbound?.owner !== this) return;
    inbound.received++;
    const request = kindOf(message) === "request" ? (message.id as JsonRpcId) : undefined;
    if (message.method === "initialize")
      return this.reply(request, -32600, "initialize is not allowed on an existing connection.");
    if (conn.state === "ended") {
      const problem = endedProblem(conn).problem;
      return this.reply(request, -32603, problem.detail, problem);
    }
    if (request !== undefined && conn.isPending(request)) {
      // Not answered under that id: the answer would settle the request already in flight.
      return this.reply(undefined, -32600, `Request id ${JSON.stringify(request)} is already in flight.`);
    }
    try {
      const queued = conn.receive(message, line);
      if (queued !== undefined) await queued;
    } catch (error) {
      // Refused unrecorded (the data directory is full or failing): nothing acted on it.
      if (error instanceof NotRecordedError)
        return this.reply(request, -32603, error.message, notRecordedData(error));
      // A recovered connection whose agent could not be started again: it ended, and says why.
      if (!(error instanceof AgentUnavailableError)) throw error;
      const problem = endedProblem(conn).problem;
      return this.reply(request, -32603, problem.detail, problem);
    }
  }

  private async initialize(message: JsonRpcMessage, line: string): Promise<void> {
    clearTimeout(this.firstFrame);
    if (message.method !== "initialize" || kindOf(message) !== "request") {
      return this.closeWith(CLOSE.policy, "the first message must be an initialize request");
    }
    try {
      const { conn, response } = await startConnection(this.deps, message, line, this.abort.signal, this.id);
      if (isObject(response.result)) {
        objectAt(objectAt(response.result, "_meta"), META_KEY).connection = {
          id: conn.id,
          eventId: eventId(conn.epoch, 0),
          acks: true,
        };
      }
      // Frames that came after the initialize wait on the preface: the connection's chain follows it.
      inbounds.set(conn, { chain: this.preface, received: 0, owner: this });
      this.send(JSON.stringify(response));
      this.attach(conn, 0);
    } catch (error) {
      if (!(error instanceof ProblemError)) throw error;
      const { problem } = error;
      this.reply(message.id as JsonRpcId, -32603, problem.detail, problem);
      this.closeWith(4000 + problem.status, problem.title.slice(0, 100));
    }
  }

  /**
   * A resumed socket takes the connection's client messages over: frames still queued from the
   * old socket are not handled (and not counted), so the count sent first is exact and the client
   * sends those again. Within one process, so it costs nothing per message.
   */
  private resume(conn: Connection, cursor: number | undefined, acks: boolean): void {
    const known = inbounds.get(conn);
    if (known) known.owner = this;
    else inbounds.set(conn, { chain: Promise.resolve(), received: 0, owner: this });
    if (acks) {
      const params = { received: known ? known.received : null, head: eventId(conn.epoch, conn.lastSeq) };
      this.send(JSON.stringify({ jsonrpc: "2.0", method: RESUMED_METHOD, params }));
    }
    this.attach(conn, cursor);
  }

  private attach(conn: Connection, cursor: number | undefined): void {
    this.conn = conn;
    if (this.ws.readyState !== this.ws.OPEN) return;
    this.reader = conn.openReader(cursor, { readable: () => this.pump(), end: () => this.readerEnded() });
    this.pump();
  }

  private get ready(): boolean {
    return this.ws.readyState === this.ws.OPEN && this.ws.bufferedAmount < HIGH_WATER_BYTES;
  }

  /**
   * Sends events while the socket takes them; the last frame's callback resumes after a drain.
   * `ws` writes each frame on its own; corking the socket around the loop makes a batch one
   * `writev` instead of a write per event (measured: 3× the server CPU per streamed event).
   */
  private pump(): void {
    const reader = this.reader;
    if (!reader) return;
    this.socket.cork();
    try {
      this.sendBatches(reader);
    } finally {
      this.socket.uncork();
    }
    if (this.ready && reader.finished) this.closeWith(CLOSE.ended, "connection ended");
  }

  private sendBatches(reader: OutboundReader): void {
    while (this.ready) {
      const batch = reader.read(WRITE_BATCH_BYTES);
      if (batch === undefined) break;
      // Each event's bytes, copied (the batch only lends them), as a text frame: no decoding and
      // encoding again.
      const last = batchLength(batch) - 1;
      for (let i = 0; i < last; i++) this.ws.send(eventBytes(batch, i), TEXT_FRAME);
      this.ws.send(eventBytes(batch, last), TEXT_FRAME, () => this.pump());
    }
  }

  private readerEnded(): void {
    this.reader = undefined;
    if (this.deps.connections.closing) this.closeWith(CLOSE.shutdown, "server shutting down");
    else if (this.conn?.state === "closed") this.closeWith(CLOSE.gone, "connection closed");
    else if (this.conn?.drained(undefined)) this.closeWith(CLOSE.ended, "connection ended");
    else this.closeWith(CLOSE.replaced, "another socket took the stream over");
  }

  /**
   * An error answer of the transport itself. Once there is a connection it goes through its event
   * log like every other frame, so that frame counting (and resuming) stays exact.
   */
  private reply(id: JsonRpcId | undefined, code: number, message: string, data?: unknown): void {
    const answer = errorResponse(id ?? null, code, message, data);
    if (this.conn) this.conn.emit(answer);
    else this.send(JSON.stringify(answer));
  }

  private send(text: string): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(text);
  }

  closeWith(code: number, reason: string): void {
    if (this.ws.readyState !== this.ws.OPEN && this.ws.readyState !== this.ws.CONNECTING) return;
    this.closedByServer = true;
    this.ws.close(code, reason);
    setTimeout(() => this.ws.terminate(), CLOSE_TIMEOUT_MS).unref();
  }

  private onClose(code: number): void {
    clearInterval(this.heartbeat);
    clearTimeout(this.firstFrame);
    this.abort.abort();
    this.reader?.close();
    this.reader = undefined;
    // The client closed on purpose: the connection ends, as with DELETE. A dropped socket (1006)
    // or a going-away page (1001) leaves it for a resume.
    if (!this.closedByServer && (code === 1000 || code === 1005) && this.conn)
      void this.conn.close("deleted");
  }
}
