import { isObject } from "../runtime/json-rpc.js";

/** The `_meta` namespace of everything Sandbox-specific. */
export const META_KEY = "sandboxagent.dev";

export const METHODS = {
  detach: "_sandboxagent/session/detach",
  terminate: "_sandboxagent/session/terminate",
  listModels: "_sandboxagent/session/list_models",
  setMetadata: "_sandboxagent/session/set_metadata",
  ended: "_sandboxagent/session/ended",
  unparsed: "_sandboxagent/agent/unparsed",
} as const;

export const EXTENSION_PREFIX = "_sandboxagent/";

/** JSON-RPC error codes the extensions answer with. */
export const ERRORS = {
  methodNotFound: -32601,
  invalidParams: -32602,
  internal: -32603,
  /** ACP `resource_not_found`, used for session ids this connection does not know. */
  resourceNotFound: -32002,
} as const;

/** `obj._meta["sandboxagent.dev"]` when it is an object. */
export function sandboxMetaOf(obj: unknown): Record<string, unknown> | undefined {
  if (!isObject(obj) || !isObject(obj._meta)) return undefined;
  const meta = obj._meta[META_KEY];
  return isObject(meta) ? meta : undefined;
}

/** Returns `obj[key]` as an object, creating it (or replacing a non-object) first. */
export function objectAt(obj: Record<string, unknown>, key: string): Record<string, unknown> {
  const current = obj[key];
  if (isObject(current)) return current;
  const created: Record<string, unknown> = {};
  obj[key] = created;
  return created;
}

/**
 * Adds `result.agentCapabilities._meta["sandboxagent.dev"].extensions`. The server answers
 * `session/list` itself when the agent cannot, so `sessionCapabilities.list` is advertised too.
 */
export function advertiseExtensions(result: Record<string, unknown>): void {
  const capabilities = objectAt(result, "agentCapabilities");
  const sandbox = objectAt(objectAt(capabilities, "_meta"), META_KEY);
  sandbox.extensions = {
    sessionDetach: true,
    sessionTerminate: true,
    sessionEndedNotification: true,
    sessionListModels: true,
    sessionSetMetadata: true,
    sessionAgentMeta: true,
    sessionListMetadata: true,
    agentUnparsedNotification: true,
    methods: Object.values(METHODS),
  };
  const sessions = objectAt(capabilities, "sessionCapabilities");
  if (!isObject(sessions.list)) sessions.list = {};
}
