import type { IncomingMessage } from "node:http";
import { problems } from "../http/problem.js";
import {
  CONNECTION_HEADERS,
  LAST_EVENT_ID_HEADER,
  PROTOCOL_VERSION_HEADER,
  SESSION_HEADER,
} from "../protocol.js";

function single(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function connectionIdOf(req: IncomingMessage): string | undefined {
  const a = single(req, CONNECTION_HEADERS[0]);
  const b = single(req, CONNECTION_HEADERS[1]);
  if (a !== undefined && b !== undefined && a !== b) {
    throw problems.badRequest("Acp-Connection-Id and x-acp-connection-id name different connections.");
  }
  return a ?? b;
}

export function requireConnectionId(req: IncomingMessage): string {
  const id = connectionIdOf(req);
  if (id === undefined) {
    throw problems.badRequest(
      "Missing Acp-Connection-Id header; POST initialize first to create a connection.",
    );
  }
  return id;
}

export function sessionHeaderOf(req: IncomingMessage): string | undefined {
  return single(req, SESSION_HEADER);
}

export function lastEventIdOf(req: IncomingMessage): string | undefined {
  return single(req, LAST_EVENT_ID_HEADER);
}

export function protocolVersionHeaderOf(req: IncomingMessage): string | undefined {
  return single(req, PROTOCOL_VERSION_HEADER);
}

export function connectionIdHeaders(id: string): Record<string, string> {
  return Object.fromEntries(CONNECTION_HEADERS.map((name) => [name, id]));
}
