/**
 * Protocol facts, in one leaf module that imports nothing: the JSON-RPC envelope the server reads,
 * the HTTP header names of the `/v2/rpc` transport, and the Sandbox namespace
 * (`_meta["sandboxagent.dev"]`, `_sandboxagent/*` methods) with its parsing. Every other layer
 * (transport, runtime, extensions, agents) takes these from here.
 */

// ---- JSON-RPC envelope ---------------------------------------------------------------------

/** The JSON-RPC envelope fields the server reads; everything else is forwarded untouched. */
export type JsonRpcId = string | number;

export interface JsonRpcMessage {
  jsonrpc?: string;
  id?: JsonRpcId | null;
  method?: string;
  params?: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

export type MessageKind = "request" | "notification" | "response" | "invalid";

export function kindOf(message: JsonRpcMessage): MessageKind {
  const hasId = message.id !== undefined && message.id !== null;
  if (typeof message.method === "string") return hasId ? "request" : "notification";
  if (hasId && ("result" in message || "error" in message)) return "response";
  return "invalid";
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Map key for an id: keeps `1` and `"1"` apart, as JSON-RPC does. */
export function idKey(id: JsonRpcId): string {
  return typeof id === "number" ? `n:${id}` : `s:${id}`;
}

/** The id an `idKey` was made from. */
export function idOfKey(key: string): JsonRpcId {
  return key.startsWith("n:") ? Number(key.slice(2)) : key.slice(2);
}

export function errorResponse(
  id: JsonRpcId | null,
  code: number,
  message: string,
  data?: unknown,
): JsonRpcMessage {
  return { jsonrpc: "2.0", id, error: data === undefined ? { code, message } : { code, message, data } };
}

/** `params.sessionId` when present. */
export function sessionIdOf(message: JsonRpcMessage): string | undefined {
  const params = message.params;
  return isObject(params) && typeof params.sessionId === "string" ? params.sessionId : undefined;
}

/** JSON-RPC error codes the server answers with. */
export const ERRORS = {
  methodNotFound: -32601,
  invalidParams: -32602,
  internal: -32603,
  /** ACP `resource_not_found`, used for session ids this connection does not know. */
  resourceNotFound: -32002,
} as const;

// ---- HTTP transport headers ------------------------------------------------------------------

/** The ACP SDK's `createHttpStream` uses `Acp-Connection-Id`; the sandbox-agent contract `x-acp-connection-id`. Both work. */
export const CONNECTION_HEADERS = ["acp-connection-id", "x-acp-connection-id"] as const;
export const SESSION_HEADER = "acp-session-id";
export const PROTOCOL_VERSION_HEADER = "acp-protocol-version";
export const LAST_EVENT_ID_HEADER = "last-event-id";

// ---- The Sandbox namespace -------------------------------------------------------------------

/** The `_meta` namespace of everything Sandbox-specific. */
export const META_KEY = "sandboxagent.dev";

export const EXTENSION_PREFIX = "_sandboxagent/";

export const METHODS = {
  detach: "_sandboxagent/session/detach",
  terminate: "_sandboxagent/session/terminate",
  listModels: "_sandboxagent/session/list_models",
  setMetadata: "_sandboxagent/session/set_metadata",
  ended: "_sandboxagent/session/ended",
  unparsed: "_sandboxagent/agent/unparsed",
} as const;

/** `obj._meta["sandboxagent.dev"]` when it is an object. */
export function sandboxMetaOf(obj: unknown): Record<string, unknown> | undefined {
  if (!isObject(obj) || !isObject(obj._meta)) return undefined;
  const meta = obj._meta[META_KEY];
  return isObject(meta) ? meta : undefined;
}

/** The agent an `initialize` request names in `_meta["sandboxagent.dev"].agent`. */
export function agentIdOf(initialize: JsonRpcMessage): string | undefined {
  const agent = sandboxMetaOf(initialize.params)?.agent;
  return typeof agent === "string" ? agent : undefined;
}

/**
 * `_meta["sandboxagent.dev"].env` of an `initialize` request: per-connection values (credentials,
 * base URLs) for the agent. `undefined` when absent, `"invalid"` unless an object of strings.
 */
export function requestEnvOf(initialize: JsonRpcMessage): Record<string, string> | undefined | "invalid" {
  const env = sandboxMetaOf(initialize.params)?.env;
  if (env === undefined) return undefined;
  if (!isObject(env) || Object.values(env).some((v) => typeof v !== "string")) return "invalid";
  return env as Record<string, string>;
}

/**
 * The `initialize` params without `_meta["sandboxagent.dev"].env`: what may be kept (on disk, in
 * logs) of a request whose env values are secrets.
 */
export function withoutRequestEnv(params: unknown): unknown {
  const meta = sandboxMetaOf(params);
  if (meta === undefined || !("env" in meta) || !isObject(params) || !isObject(params._meta)) return params;
  const { env: _secret, ...rest } = meta;
  return { ...params, _meta: { ...params._meta, [META_KEY]: rest } };
}
