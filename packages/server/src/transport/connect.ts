/**
 * What both `/v2/rpc` transports (HTTP + SSE, WebSocket) share: their dependencies, looking a
 * connection up, starting one from `initialize`, and the problems that say why one is unusable.
 */
import type { Launch } from "../agents/launch.js";
import { ProblemError, problems } from "../http/problem.js";
import { unavailable } from "../http/unavailable.js";
import type { Logger } from "../log.js";
import type { JsonRpcMessage } from "../protocol.js";
import { InitializeError, type Connection, type NotRecordedError } from "../runtime/connection.js";
import { ConnectionRefused, type ConnectionRegistry } from "../runtime/connections.js";
import type { ConnectionExtension } from "../runtime/extension.js";
import type { RuntimeLimits } from "../runtime/options.js";

export interface RpcDeps {
  connections: ConnectionRegistry;
  limits: RuntimeLimits;
  logger: Logger;
  /** The extensions every connection runs, resolved before the first connection starts. */
  extensions(): Promise<ConnectionExtension[]>;
  /** Resolves the agent named by an `initialize` request; throws a ProblemError when it can't. */
  launch(initialize: JsonRpcMessage): Promise<Launch>;
}

export function lookup(deps: RpcDeps, id: string): Connection {
  const conn = deps.connections.get(id);
  if (!conn) throw problems.notFound("Unknown or closed connection; POST initialize to start a new one.");
  return conn;
}

/** 410 for a connection that ended: why (agent exit, or the server's reason) and the exit details. */
export function endedProblem(conn: Connection, more = ""): ProblemError {
  const ending = conn.ending;
  const detail =
    ending === undefined || ending.reason === "agent_exited"
      ? "The agent process has exited; start a new connection."
      : `${ending.message} Start a new connection.`;
  return problems.gone(detail + more, { reason: ending?.reason ?? "agent_exited", exit: conn.exit ?? null });
}

/**
 * What a client is told of a request the server could not record in flight (its data directory is
 * full or failing), so it did not run it: the WebSocket's JSON-RPC error `data`, and the members of
 * the POST's problem (`notRecordedProblem`).
 */
export function notRecordedData(error: NotRecordedError): Record<string, unknown> {
  return { reason: "not_recorded", reachedAgent: false, error: error.cause.message };
}

/** 503 for a request the server could not record in flight (see `notRecordedData`). */
export function notRecordedProblem(error: NotRecordedError): ProblemError {
  return unavailable(error.message, notRecordedData(error));
}

function refusedProblem(error: ConnectionRefused): ProblemError {
  return error.kind === "full"
    ? unavailable(error.message, { limit: error.limit })
    : unavailable(error.message, { reason: "shutting_down" });
}

/** Spawn errors that say the machine is out of something for now: descriptors, processes, memory. */
const RESOURCE_ERRORS = new Set(["EMFILE", "ENFILE", "EAGAIN", "ENOMEM"]);

/**
 * Starts a connection from an `initialize` request: checks capacity, resolves the agent, spawns it
 * and waits for its answer. Every failure is a `ProblemError` (the HTTP transport sends it as is,
 * the WebSocket transport as a JSON-RPC error). `id` names the connection when the transport had
 * to tell it before initialize (a WebSocket's 101 response).
 */
export async function startConnection(
  deps: RpcDeps,
  message: JsonRpcMessage,
  line: string,
  signal: AbortSignal,
  id?: string,
): Promise<{ conn: Connection; response: JsonRpcMessage }> {
  const create = (launch: Launch, extensions: ConnectionExtension[]): Connection => {
    try {
      return deps.connections.create({
        id,
        launch,
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
  try {
    const response = await conn.initialize(message, line, signal);
    deps.connections.register(conn);
    return { conn, response };
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
