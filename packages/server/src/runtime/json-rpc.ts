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
