import type { Launch } from "../agents/launch.js";
import { accepts, isJsonContentType, readBody } from "../http/body.js";
import { ProblemError, problems } from "../http/problem.js";
import { sendJson, type HttpContext, type Route } from "../http/router.js";
import { unavailable } from "../http/unavailable.js";
import type { Logger } from "../log.js";
import { InitializeError, type Connection } from "../runtime/connection.js";
import { ConnectionRefused, type ConnectionRegistry } from "../runtime/connections.js";
import type { ConnectionExtension } from "../runtime/extension.js";
import { kindOf, sessionIdOf, type JsonRpcMessage } from "../protocol.js";
import type { RuntimeLimits } from "../runtime/options.js";
import {
  connectionIdHeaders,
  connectionIdOf,
  lastEventIdOf,
  protocolVersionHeaderOf,
  requireConnectionId,
  sessionHeaderOf,
} from "./headers.js";
import { parseMessage } from "./parse-message.js";
import { cursorOf, idleStream, streamConnection } from "./sse.js";

export interface RpcDeps {
  connections: ConnectionRegistry;
  limits: RuntimeLimits;
  logger: Logger;
  /** The extensions every connection runs, resolved before the first connection starts. */
  extensions(): Promise<ConnectionExtension[]>;
  /** Resolves the agent named by an `initialize` request; throws a ProblemError when it can't. */
  launch(initialize: JsonRpcMessage): Promise<Launch>;
}

export const RPC_PATH = "/v2/rpc";

export function rpcRoutes(deps: RpcDeps): Route[] {
  return [
    { method: "POST", path: RPC_PATH, handler: (ctx) => post(ctx, deps) },
    { method: "GET", path: RPC_PATH, handler: (ctx) => get(ctx, deps) },
    { method: "DELETE", path: RPC_PATH, handler: (ctx) => remove(ctx, deps) },
  ];
}

function lookup(deps: RpcDeps, id: string): Connection {
  const conn = deps.connections.get(id);
  if (!conn) throw problems.notFound("Unknown or closed connection; POST initialize to start a new one.");
  return conn;
}

async function post({ req, res }: HttpContext, deps: RpcDeps): Promise<void> {
  if (!isJsonContentType(req.headers["content-type"])) {
    throw problems.unsupportedMediaType("POST bodies must be Content-Type: application/json.");
  }
  const { message, line } = parseMessage(await readBody(req, deps.limits.maxBodyBytes));
  const id = connectionIdOf(req);
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
  const conn = lookup(deps, id);
  if (conn.state === "ended") throw endedProblem(conn);
  checkSessionHeader(sessionHeaderOf(req), message);
  checkProtocolVersion(protocolVersionHeaderOf(req), conn);
  if (kindOf(message) === "request" && conn.isPending(message.id!)) {
    throw problems.badRequest(
      `Request id ${JSON.stringify(message.id)} is already in flight on this connection.`,
    );
  }
  await conn.receive(message, line);
  res.writeHead(202).end();
}

function checkSessionHeader(header: string | undefined, message: JsonRpcMessage): void {
  const sessionId = sessionIdOf(message);
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

/** 410 for a connection that ended: why (agent exit, or the server's reason) and the exit details. */
function endedProblem(conn: Connection, more = ""): ProblemError {
  const ending = conn.ending;
  const detail =
    ending === undefined || ending.reason === "agent_exited"
      ? "The agent process has exited; start a new connection."
      : `${ending.message} Start a new connection.`;
  return problems.gone(detail + more, { reason: ending?.reason ?? "agent_exited", exit: conn.exit ?? null });
}

function refusedProblem(error: ConnectionRefused): ProblemError {
  return error.kind === "full"
    ? unavailable(error.message, { limit: error.limit })
    : unavailable(error.message, { reason: "shutting_down" });
}

/** Spawn errors that say the machine is out of something for now: descriptors, processes, memory. */
const RESOURCE_ERRORS = new Set(["EMFILE", "ENFILE", "EAGAIN", "ENOMEM"]);

async function initialize(
  res: HttpContext["res"],
  deps: RpcDeps,
  message: JsonRpcMessage,
  line: string,
): Promise<void> {
  const create = (launch: Launch, extensions: ConnectionExtension[]): Connection => {
    try {
      return deps.connections.create({
        agent: launch.agent,
        env: launch.env,
        cwd: launch.cwd,
        limits: deps.limits,
        logger: deps.logger,
        extensions,
      });
    } catch (error) {
      throw error instanceof ConnectionRefused ? refusedProblem(error) : error;
    }
  };
  // Refuse before resolving the agent (which may install it for minutes); `create` checks again.
  try {
    deps.connections.checkCapacity();
  } catch (error) {
    throw error instanceof ConnectionRefused ? refusedProblem(error) : error;
  }
  const [launch, extensions] = await Promise.all([deps.launch(message), deps.extensions()]);
  const conn = create(launch, extensions);
  const abort = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) abort.abort();
  });
  try {
    const response = await conn.initialize(message, line, abort.signal);
    deps.connections.register(conn);
    sendJson(res, 200, response, connectionIdHeaders(conn.id));
  } catch (error) {
    if (!(error instanceof InitializeError)) throw error;
    if (deps.connections.closing)
      throw unavailable("The server is shutting down; the agent was stopped.", { reason: "shutting_down" });
    throw initializeProblem(error, launch.agent.id);
  }
}

function initializeProblem(error: InitializeError, agentId: string): ProblemError {
  const ext = { agent: agentId, ...error.details };
  const code = error.details.spawnErrorCode;
  if (error.kind === "spawn" && typeof code === "string" && RESOURCE_ERRORS.has(code)) {
    return unavailable(
      `The server could not start the agent: out of resources (${code}). Retry later, or close connections; ` +
        "limits.maxConnections keeps the server below the point where this happens.",
      ext,
      5,
    );
  }
  switch (error.kind) {
    case "timeout":
      return new ProblemError(504, "agent-initialize-timeout", "Agent Timeout", error.message, ext);
    case "rejected":
      return new ProblemError(
        502,
        "agent-initialize-rejected",
        "Agent Rejected Initialize",
        error.message,
        ext,
      );
    case "aborted":
      return new ProblemError(499, "client-closed", "Client Closed Request", error.message, ext);
    default:
      return new ProblemError(502, "agent-start-failed", "Agent Failed To Start", error.message, ext);
  }
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
