import { MAX_JSON_DEPTH, scanJson } from "../http/json.js";
import { problems } from "../http/problem.js";
import { isObject, kindOf, sessionIdOf, type JsonRpcMessage } from "../protocol.js";

export interface ParsedMessage {
  message: JsonRpcMessage;
  /** The line written to the agent: the body itself when it is already one line (verbatim forwarding). */
  line: string;
  /** `params.sessionId` when it is a string (checked against the `Acp-Session-Id` header). */
  sessionId: string | undefined;
}

/** Longest string id accepted: ids are echoed in answers, logs and problems. */
export const MAX_STRING_ID_LENGTH = 1024;

/** How a numeric id must be written: an integer, without fraction or exponent. */
const INTEGER_SOURCE = /^-?(0|[1-9][0-9]*)$/;

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
  const scan = scanJson(text, "id");
  if (scan.depth > MAX_JSON_DEPTH) {
    throw invalid(`The message is nested ${scan.depth} levels deep; at most ${MAX_JSON_DEPTH} are accepted.`);
  }
  const message = value as JsonRpcMessage;
  if (message.jsonrpc !== "2.0") throw invalid('The message must have "jsonrpc": "2.0".');
  checkId(message.id, scan.member);
  if (kindOf(message) === "invalid") {
    throw invalid("The message is neither a request, a notification nor a response.");
  }
  // NDJSON framing forbids raw newlines; re-serializing keeps every field (incl. `_meta`) as sent.
  const line = /[\r\n]/.test(text) ? JSON.stringify(value) : text;
  return { message, line, sessionId: sessionIdOf(message) };
}

/**
 * Ids are strings, integers or null. An agent must echo the id exactly, and agents decode numbers
 * differently: `1e400` parses to Infinity and comes back as `null`, integers past 2^53 lose digits
 * in JavaScript, and agents that read ids as 64-bit integers (the Rust ACP crate) refuse `1.5`, `1.0`
 * and `1e3`. Any of these would leave the request waiting for an answer that never matches.
 */
function checkId(id: unknown, source: string | undefined): void {
  if (id === undefined || id === null) return;
  if (typeof id === "string") {
    if (id.length > MAX_STRING_ID_LENGTH) {
      throw invalid(`The id is ${id.length} characters long; at most ${MAX_STRING_ID_LENGTH} are accepted.`);
    }
    return;
  }
  if (typeof id !== "number") throw invalid("The id must be a string, an integer or null.");
  if (!Number.isSafeInteger(id) || source === undefined || !INTEGER_SOURCE.test(source)) {
    throw invalid(
      `The numeric id ${(source ?? String(id)).slice(0, 40)} is not an integer between ` +
        `-(2^53-1) and 2^53-1 written without fraction or exponent; use such an integer or a string.`,
    );
  }
}

function invalid(detail: string) {
  return problems.badRequest(detail, { jsonrpcError: { code: -32600, message: "Invalid Request" } });
}
