import { problems } from "../http/problem.js";
import { isObject, kindOf, type JsonRpcMessage } from "../runtime/json-rpc.js";

export interface ParsedMessage {
  message: JsonRpcMessage;
  /** The line written to the agent: the body itself when it is already one line (verbatim forwarding). */
  line: string;
}

/** Parses a POST body as exactly one JSON-RPC message (no batches, no scalars). */
export function parseMessage(body: Buffer): ParsedMessage {
  const text = body.toString("utf8").trim();
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw problems.badRequest(`The body is not valid JSON: ${(error as Error).message}`, {
      jsonrpcError: { code: -32700, message: "Parse error" },
    });
  }
  if (Array.isArray(value)) {
    throw problems.badRequest("JSON-RPC batches are not supported: send one message per POST.", {
      jsonrpcError: { code: -32600, message: "Invalid Request" },
    });
  }
  if (!isObject(value)) throw invalid("The body must be a JSON-RPC message object.");
  const message = value as JsonRpcMessage;
  if (message.jsonrpc !== "2.0") throw invalid('The message must have "jsonrpc": "2.0".');
  if (kindOf(message) === "invalid") {
    throw invalid("The message is neither a request, a notification nor a response.");
  }
  // NDJSON framing forbids raw newlines; re-serializing keeps every field (incl. `_meta`) as sent.
  const line = /[\r\n]/.test(text) ? JSON.stringify(value) : text;
  return { message, line };
}

function invalid(detail: string) {
  return problems.badRequest(detail, { jsonrpcError: { code: -32600, message: "Invalid Request" } });
}
