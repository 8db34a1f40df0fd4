import type { IncomingMessage, ServerResponse } from "node:http";
import { accepts, isJsonContentType, readBodyThen, type BodyReceiver } from "../http/body.js";
import { problems } from "../http/problem.js";
import { answerFailure, failureLog, sendJson, type HttpContext, type Route } from "../http/router.js";
import type { TicketBook } from "../http/tickets.js";
import { AgentUnavailableError, NotRecordedError, type Connection } from "../runtime/connection.js";
import { kindOf, type JsonRpcMessage } from "../protocol.js";
import { endedProblem, lookup, notRecordedProblem, startConnection, type RpcDeps } from "./connect.js";
import {
  connectionIdHeaders,
  connectionIdOf,
  lastEventIdOf,
  protocolVersionHeaderOf,
  requireConnectionId,
  sessionHeaderOf,
} from "./headers.js";
import { readMessage } from "./envelope.js";
import { cursorOf } from "./event-ids.js";
import { idleStream, streamConnection } from "./sse.js";

export const RPC_PATH = "/v2/rpc";

/** Tickets for WebSocket upgrades of `/v2/rpc` (browsers cannot send `Authorization` on one). */
export const RPC_TICKET_PATH = "/v2/rpc/ticket";

export function rpcRoutes(deps: RpcDeps, tickets: TicketBook): Route[] {
  const post = rpcPost(deps);
  return [
    {
      method: "POST",
      path: RPC_TICKET_PATH,
      handler: ({ res }) => sendJson(res, 201, tickets.issue(RPC_PATH)),
    },
    { method: "POST", path: RPC_PATH, handler: ({ req, res }) => post(req, res) },
    { method: "GET", path: RPC_PATH, handler: (ctx) => get(ctx, deps) },
    { method: "DELETE", path: RPC_PATH, handler: (ctx) => remove(ctx, deps) },
  ];
}

/**
 * `POST /v2/rpc`: the route's handler, which the listener also calls directly for a request that is
 * plainly one (server.ts), past the router. Not `async`, and no closure or promise of its own for
 * a message the connection takes at once (a turn's `session/prompt`): the body is read with shared
 * listeners (`readBodyThen`), the message accepted as it ends, and a failure after the body is
 * answered as `withProblems` answers what this throws before it (bench/README.md,
 * "The request path past the router").
 */
export function rpcPost(deps: RpcDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const log = failureLog(deps.logger);
  const failed = (res: ServerResponse, error: unknown): void => answerFailure(res, error, log);
  const received: BodyReceiver<ServerResponse> = (req, res, body, error) => {
    try {
      if (body === undefined) throw error;
      const queued = accept(req, res, body, deps);
      if (queued !== undefined) queued.then(undefined, (failure: unknown) => failed(res, failure));
    } catch (failure) {
      failed(res, failure);
    }
  };
  return (req, res) => {
    if (!isJsonContentType(req.headers["content-type"])) {
      throw problems.unsupportedMediaType("POST bodies must be Content-Type: application/json.");
    }
    readBodyThen(req, deps.limits.maxBodyBytes, received, res);
  };
}

/**
 * The POST's message, read from its whole `body`: checked, handed to its connection, and answered
 * 202 (200 for `initialize`). Returns a promise only when there is something to wait for.
 */
function accept(
  req: IncomingMessage,
  res: ServerResponse,
  body: Buffer,
  deps: RpcDeps,
): Promise<void> | undefined {
  const id = connectionIdOf(req);
  const known = id === undefined ? undefined : deps.connections.get(id);
  // Only a known connection can say which methods must be parsed; every other body is parsed.
  const { message, line, sessionId } = readMessage(body, known);
  if (message.method === "initialize") {
    if (id !== undefined) throw problems.badRequest("initialize is not allowed on an existing connection.");
    if (kindOf(message) !== "request") throw problems.badRequest("initialize must be a request with an id.");
    return initialize(res, deps, message, line);
  }
  if (id === undefined) {
    throw problems.badRequest(
      "Missing Acp-Connection-Id header; POST initialize first to create a connection.",
    );
  }
  const conn = known ?? lookup(deps, id);
  if (conn.state === "ended") throw endedProblem(conn);
  checkSessionHeader(sessionHeaderOf(req), sessionId);
  checkProtocolVersion(protocolVersionHeaderOf(req), conn);
  if (kindOf(message) === "request" && conn.isPending(message.id!)) {
    throw problems.badRequest(
      `Request id ${JSON.stringify(message.id)} is already in flight on this connection.`,
    );
  }
  let queued: Promise<void> | undefined;
  try {
    // A request is recorded in flight before this is done: the 202 promises an answer, even across a restart.
    queued = conn.receive(message, line);
  } catch (error) {
    throw receiveProblem(error, conn);
  }
  if (queued === undefined) {
    res.writeHead(202).end();
    return undefined;
  }
  return queued.then(
    () => void res.writeHead(202).end(),
    (error: unknown) => {
      throw receiveProblem(error, conn);
    },
  );
}

/**
 * What `Connection.receive` threw, as the POST's answer (a function of its own, out of the hot
 * `post` that TurboFan compiles in a connection's first requests: bench/README.md, Cold window).
 */
function receiveProblem(error: unknown, conn: Connection): unknown {
  // A recovered connection whose agent could not be started again: it ended, and says why.
  if (error instanceof AgentUnavailableError) return endedProblem(conn);
  // Refused unrecorded (the data directory is full or failing): nothing acted on it.
  if (error instanceof NotRecordedError) return notRecordedProblem(error);
  return error;
}

function checkSessionHeader(header: string | undefined, sessionId: string | undefined): void {
  if (header !== undefined && sessionId !== undefined && header !== sessionId) {
    throw problems.badRequest("Mismatched Acp-Session-Id: the header and params.sessionId differ.");
  }
}

function checkProtocolVersion(header: string | undefined, conn: Connection): void {
  if (header !== undefined && conn.protocolVersion !== undefined && header !== String(conn.protocolVersion)) {
    throw problems.badRequest(
      `Acp-Protocol-Version ${header} differs from the negotiated version ${conn.protocolVersion}.`,
    );
  }
}

async function initialize(
  res: HttpContext["res"],
  deps: RpcDeps,
  message: JsonRpcMessage,
  line: string,
): Promise<void> {
  const abort = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) abort.abort();
  });
  const { conn, response } = await startConnection(deps, message, line, abort.signal);
  sendJson(res, 200, response, connectionIdHeaders(conn.id));
}

function get({ req, res }: HttpContext, deps: RpcDeps): void {
  if (!accepts(req, "text/event-stream")) {
    throw problems.notAcceptable("GET /v2/rpc is an SSE stream: send Accept: text/event-stream.");
  }
  const conn = lookup(deps, requireConnectionId(req));
  const { keepAliveMs, retryMs } = deps.limits;
  if (sessionHeaderOf(req) !== undefined) return idleStream(res, conn, { keepAliveMs, retryMs });
  const cursor = cursorOf(conn, lastEventIdOf(req));
  if (conn.drained(cursor)) throw endedProblem(conn, " Every event was delivered.");
  if (cursor === undefined && conn.hasReader) {
    throw problems.conflict("Another reader is attached; reconnect with Last-Event-ID to take over.");
  }
  streamConnection(res, conn, cursor, { keepAliveMs, retryMs });
}

function remove({ req, res }: HttpContext, deps: RpcDeps): void {
  const conn = lookup(deps, requireConnectionId(req));
  void conn.close("deleted");
  res.writeHead(202).end();
}
