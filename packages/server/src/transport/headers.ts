import type { IncomingMessage } from "node:http";
import { problems } from "../http/problem.js";
import {
  CONNECTION_HEADERS,
  LAST_EVENT_ID_HEADER,
  PROTOCOL_VERSION_HEADER,
  SESSION_HEADER,
} from "../protocol.js";

// Each header is read with the same expression (the first of a repeated header), written out in
// each function rather than in a helper: `POST /v2/rpc` reads four of them per request, and such a
// helper is a TurboFan job of its own in a connection's first requests (bench/README.md,
// "The client-request path's compile jobs").

export function connectionIdOf(req: IncomingMessage): string | undefined {
  const { headers } = req;
  let a = headers[CONNECTION_HEADERS[0]];
  if (Array.isArray(a)) a = a[0];
  let b = headers[CONNECTION_HEADERS[1]];
  if (Array.isArray(b)) b = b[0];
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
  const value = req.headers[SESSION_HEADER];
  return Array.isArray(value) ? value[0] : value;
}

export function lastEventIdOf(req: IncomingMessage): string | undefined {
  const value = req.headers[LAST_EVENT_ID_HEADER];
  return Array.isArray(value) ? value[0] : value;
}

export function protocolVersionHeaderOf(req: IncomingMessage): string | undefined {
  const value = req.headers[PROTOCOL_VERSION_HEADER];
  return Array.isArray(value) ? value[0] : value;
}

export function connectionIdHeaders(id: string): Record<string, string> {
  return Object.fromEntries(CONNECTION_HEADERS.map((name) => [name, id]));
}
