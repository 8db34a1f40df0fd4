import type { Logger } from "../log.js";
import type { ConnectionApi, ConnectionExtension } from "../runtime/extension.js";
import {
  errorResponse,
  ERRORS,
  isObject,
  kindOf,
  META_KEY,
  sandboxMetaOf,
  type JsonRpcId,
  type JsonRpcMessage,
} from "../protocol.js";
import {
  clientRequestAnswerer,
  FS_METHODS,
  TERMINAL_METHODS,
  type ClientMethod,
  type ClientRequestAnswerer,
  type ClientRequestDeps,
  type TerminalTable,
} from "./client-requests.js";
import { RpcError } from "./methods.js";
import { objectAt } from "./advertise.js";

/** The capabilities a connection asked the server to provide on its behalf. */
interface Served {
  fs: boolean;
  terminal: boolean;
  terminals: TerminalTable;
}

/** `_meta["sandboxagent.dev"].serveClientCapabilities`: `true` for all, or `{fs?, terminal?}`. */
export const OPTION = "serveClientCapabilities";

function requested(option: unknown): { fs: boolean; terminal: boolean } | undefined {
  if (option === true) return { fs: true, terminal: true };
  if (!isObject(option)) return undefined;
  const wanted = { fs: option.fs === true, terminal: option.terminal === true };
  return wanted.fs || wanted.terminal ? wanted : undefined;
}

/**
 * Serves ACP client capabilities inside the sandbox, per connection and opt-in: with
 * `initialize` `params._meta["sandboxagent.dev"].serveClientCapabilities`, the server advertises
 * `fs.readTextFile`/`fs.writeTextFile` and/or `terminal` to the agent as if the client had, and
 * answers the agent's `fs/*` and `terminal/*` requests itself: no round trip to a client far
 * away, and clients that implement neither still get agents that rely on them. Everything else,
 * tool calls included, still reaches the client; a terminal id is a process id of
 * `/v2/processes`, so a client can follow a terminal's output there.
 */
export class ClientCapabilitiesExtension implements ConnectionExtension {
  // Keyed by the connection object: a connection whose initialize failed leaves nothing behind.
  private readonly served = new WeakMap<ConnectionApi, Served>();
  private readonly answer: ClientRequestAnswerer;

  constructor(
    private readonly deps: ClientRequestDeps,
    private readonly logger: Logger,
  ) {
    this.answer = clientRequestAnswerer(deps);
  }

  initializeRequest(request: JsonRpcMessage, conn: ConnectionApi): boolean {
    const wanted = requested(sandboxMetaOf(request.params)?.[OPTION]);
    if (!wanted || !isObject(request.params)) return false;
    this.served.set(conn, { ...wanted, terminals: new Map() });
    const capabilities = objectAt(request.params, "clientCapabilities");
    if (wanted.fs) Object.assign(objectAt(capabilities, "fs"), { readTextFile: true, writeTextFile: true });
    if (wanted.terminal) capabilities.terminal = true;
    return true;
  }

  initializeResult(result: Record<string, unknown>, conn: ConnectionApi): void {
    const served = this.served.get(conn);
    if (!served) return;
    const sandbox = objectAt(objectAt(objectAt(result, "agentCapabilities"), "_meta"), META_KEY);
    sandbox.servedClientCapabilities = {
      fs: served.fs ? { readTextFile: true, writeTextFile: true } : {},
      terminal: served.terminal,
    };
  }

  agentMessage(message: JsonRpcMessage, conn: ConnectionApi): boolean {
    const served = this.served.get(conn);
    const method = message.method as ClientMethod;
    if (!served || kindOf(message) !== "request") return false;
    if (
      !(served.fs && FS_METHODS.includes(method)) &&
      !(served.terminal && TERMINAL_METHODS.includes(method))
    )
      return false;
    void this.respond(conn, served, method, message);
    return true;
  }

  /** Declared so text chunks keep skipping JSON.parse (see `agentTextChunk` in runtime/extension.ts). */
  agentTextChunk(): boolean {
    return false;
  }

  sessionsEnded(conn: ConnectionApi): void {
    const served = this.served.get(conn);
    this.served.delete(conn);
    for (const id of served?.terminals.keys() ?? []) void this.deps.processes.remove(id).catch(() => {});
  }

  private async respond(conn: ConnectionApi, served: Served, method: ClientMethod, request: JsonRpcMessage) {
    const id = request.id as JsonRpcId;
    let response: JsonRpcMessage;
    try {
      response = { jsonrpc: "2.0", id, result: await this.answer(method, request.params, served.terminals) };
    } catch (error) {
      if (!(error instanceof RpcError))
        this.logger.error("client request failed", { method, error: String(error) });
      response =
        error instanceof RpcError
          ? errorResponse(id, error.code, error.message, error.data)
          : errorResponse(id, ERRORS.internal, error instanceof Error ? error.message : String(error));
    }
    await conn.forward(response);
  }
}
