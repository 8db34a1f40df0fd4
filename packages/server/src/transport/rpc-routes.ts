import type { AgentDefinition } from "../agents/types.js";
import { accepts, isJsonContentType, readBody } from "../http/body.js";
import { ProblemError, problems } from "../http/problem.js";
import { sendJson, type HttpContext, type Route } from "../http/router.js";
import type { Logger } from "../log.js";
import { InitializeError, type Connection } from "../runtime/connection.js";
import type { ConnectionRegistry } from "../runtime/connections.js";
import type { ConnectionExtension } from "../runtime/extension.js";
import { isObject, kindOf, sessionIdOf, type JsonRpcMessage } from "../runtime/json-rpc.js";
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

/** What a connection needs to start: the agent, its environment and working directory. */
export interface Launch {
  agent: AgentDefinition;
  env: Record<string, string>;
  cwd?: string;
}

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
  if (conn.state === "ended") {
    throw problems.gone("The agent process has exited; start a new connection.", { exit: conn.exit ?? null });
  }
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

async function initialize(
  res: HttpContext["res"],
  deps: RpcDeps,
  message: JsonRpcMessage,
  line: string,
): Promise<void> {
  const [launch, extensions] = await Promise.all([deps.launch(message), deps.extensions()]);
  const conn = deps.connections.create({
    agent: launch.agent,
    env: launch.env,
    cwd: launch.cwd,
    limits: deps.limits,
    logger: deps.logger,
    extensions,
  });
  const abort = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) abort.abort();
  });
  try {
    const response = await conn.initialize(message, line, abort.signal);
    deps.connections.register(conn);
    sendJson(res, 200, response, connectionIdHeaders(conn.id));
  } catch (error) {
    throw error instanceof InitializeError ? initializeProblem(error, launch.agent.id) : error;
  }
}

function initializeProblem(error: InitializeError, agentId: string): ProblemError {
  const ext = { agent: agentId, ...error.details };
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
  if (sessionHeaderOf(req) !== undefined) return conn.attachSessionStream(res);
  const lastEventId = lastEventIdOf(req);
  const cursor = conn.resolveCursor(lastEventId);
  if (cursor === "malformed")
    throw problems.badRequest(`Malformed Last-Event-ID ${JSON.stringify(lastEventId)}.`);
  if (cursor === "gone") {
    throw problems.gone(
      "Last-Event-ID is not in this connection's replay log (evicted or foreign); events after it can't be replayed.",
    );
  }
  if (conn.drained(cursor)) {
    throw problems.gone("The agent process has exited and every event was delivered.", {
      exit: conn.exit ?? null,
    });
  }
  if (cursor === undefined && conn.hasReader) {
    throw problems.conflict("Another reader is attached; reconnect with Last-Event-ID to take over.");
  }
  conn.attach(res, cursor);
}

function remove({ req, res }: HttpContext, deps: RpcDeps): void {
  const conn = lookup(deps, requireConnectionId(req));
  void conn.close("deleted");
  res.writeHead(202).end();
}

export function agentIdOf(message: JsonRpcMessage): string | undefined {
  const params = message.params;
  if (!isObject(params) || !isObject(params._meta)) return undefined;
  const ours = params._meta["sandboxagent.dev"];
  return isObject(ours) && typeof ours.agent === "string" ? ours.agent : undefined;
}
