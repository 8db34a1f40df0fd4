import type { AnyMessage, AnyNotification, AnyRequest, AnyResponse } from "@agentclientprotocol/sdk";

export type JsonRpcId = AnyRequest["id"];

export function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

export function isRequest(message: AnyMessage): message is AnyRequest {
  return "method" in message && "id" in message && message.id !== undefined;
}

export function isNotification(message: AnyMessage): message is AnyNotification {
  return "method" in message && !isRequest(message);
}

export function isResponse(message: AnyMessage): message is AnyResponse {
  return !("method" in message) && "id" in message;
}

/** JSON-RPC ids 1 and "1" are distinct: keep the type in the key. */
export function idKey(id: JsonRpcId): string {
  return `${typeof id}:${String(id)}`;
}

/** A parsed SSE `data:` payload, or undefined when it is not a single JSON-RPC message. */
export function parseMessage(data: string): AnyMessage | undefined {
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return undefined;
  }
  return isRecord(value) && value.jsonrpc === "2.0" ? (value as AnyMessage) : undefined;
}

/** `params.sessionId` of an outbound or inbound message. */
export function paramsSessionId(message: AnyMessage): string | undefined {
  const params = "params" in message ? message.params : undefined;
  return isRecord(params) && typeof params.sessionId === "string" ? params.sessionId : undefined;
}

/** `result.sessionId` of a response (session/new, session/fork, …). */
export function resultSessionId(message: AnyMessage): string | undefined {
  const result = "result" in message ? message.result : undefined;
  return isRecord(result) && typeof result.sessionId === "string" ? result.sessionId : undefined;
}
