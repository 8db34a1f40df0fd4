import { nodeCrypto } from "../lazy-builtins.js";
import type { IncomingMessage, ServerResponse } from "node:http";
import { problems } from "./problem.js";

export interface SecurityOptions {
  /** Bearer token; `undefined` disables auth (only allowed on loopback). */
  token: string | undefined;
  /** Exact origins (scheme://host[:port]) allowed to call the server from a browser. */
  allowedOrigins: string[];
  /** Extra Host header names accepted besides loopback names (DNS-rebinding protection). */
  allowedHosts: string[];
  /** Whether the listener is loopback-only; then Host must be a loopback name unless allow-listed. */
  loopbackOnly: boolean;
}

const CORS_ALLOW_HEADERS =
  "content-type, authorization, acp-connection-id, x-acp-connection-id, acp-session-id, acp-protocol-version, last-event-id";
const CORS_EXPOSE_HEADERS = "acp-connection-id, x-acp-connection-id";
/** `Bearer` and the spaces after it: auth schemes are case-insensitive (RFC 9110 §11.1). */
const BEARER = /^bearer +/i;
const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);

function digest(value: string): Buffer {
  return nodeCrypto().createHash("sha256").update(value).digest();
}

/** The digest of the server's token, made once (a one-entry memo: a process runs one server, tests several). */
let tokenDigest: { token: string; digest: Buffer } | undefined;

function digestOfToken(token: string): Buffer {
  if (tokenDigest?.token !== token) tokenDigest = { token, digest: digest(token) };
  return tokenDigest.digest;
}

function hostName(host: string): string {
  if (host.startsWith("[")) return host.slice(0, host.indexOf("]") + 1);
  const colon = host.indexOf(":");
  return colon === -1 ? host : host.slice(0, colon);
}

/** The last Host value found to name a loopback address: a client sends the same one every request. */
let lastLoopbackHost = "";

function isLoopbackHost(host: string): boolean {
  if (host === lastLoopbackHost) return true;
  if (!LOOPBACK_HOSTS.has(hostName(host))) return false;
  lastLoopbackHost = host;
  return true;
}

/** Host check (DNS-rebinding protection): throws 403 for a name a loopback listener must not answer. */
export function checkHost(req: IncomingMessage, options: SecurityOptions): void {
  const host = req.headers.host ?? "";
  if (req.headers.host === undefined && req.httpVersion === "1.1") {
    throw problems.badRequest("HTTP/1.1 requests must carry a Host header (RFC 9112 §3.2).");
  }
  if (options.loopbackOnly && !isLoopbackHost(host) && !options.allowedHosts.includes(host)) {
    throw problems.forbidden(`Host ${JSON.stringify(host)} is not allowed (DNS-rebinding protection).`);
  }
}

/** Origin check: throws 403 for an Origin not on the allow-list; returns the allowed Origin, if any. */
export function checkOrigin(req: IncomingMessage, options: SecurityOptions): string | undefined {
  const origin = req.headers.origin;
  if (
    origin !== undefined &&
    !options.allowedOrigins.includes(origin) &&
    !isTrustedSameOrigin(origin, req.headers.host ?? "", options)
  ) {
    throw problems.forbidden(
      `Origin ${origin} is not allowed; start the server with --allow-origin ${origin}.`,
    );
  }
  return origin;
}

/** Whether the request carries the server token as `Authorization: Bearer` (true when there is none). */
export function hasBearerToken(req: IncomingMessage, options: SecurityOptions): boolean {
  if (options.token === undefined) return true;
  const header = req.headers.authorization ?? "";
  const scheme = BEARER.exec(header);
  const presented = scheme ? header.slice(scheme[0].length) : "";
  // Hash both sides so the comparison is constant-time regardless of length.
  return nodeCrypto().timingSafeEqual(digest(presented), digestOfToken(options.token));
}

/**
 * A page this server served (the inspector at /ui/) calls it with its own origin. Trusted when the
 * Host is one the checks above vouch for, or when the token guards every call anyway; otherwise a
 * DNS-rebound page would pass as same-origin.
 */
function isTrustedSameOrigin(origin: string, host: string, options: SecurityOptions): boolean {
  const trustedHost =
    options.token !== undefined || isLoopbackHost(host) || options.allowedHosts.includes(host);
  if (!trustedHost) return false;
  try {
    const url = new URL(origin);
    return (url.protocol === "http:" || url.protocol === "https:") && url.host === host.toLowerCase();
  } catch {
    return false;
  }
}

/**
 * Applies Host, Origin and bearer-token checks and answers CORS preflights.
 * Returns false when the request was fully answered (preflight) and must not be routed.
 */
export function checkRequest(req: IncomingMessage, res: ServerResponse, options: SecurityOptions): boolean {
  checkHost(req, options);
  const origin = checkOrigin(req, options);
  if (origin !== undefined) {
    res.setHeader("access-control-allow-origin", origin);
    res.setHeader("vary", "Origin");
    res.setHeader("access-control-expose-headers", CORS_EXPOSE_HEADERS);
    if (req.method === "OPTIONS") {
      res.writeHead(204, {
        "access-control-allow-methods": "GET, POST, PUT, DELETE, OPTIONS",
        "access-control-allow-headers": CORS_ALLOW_HEADERS,
        "access-control-max-age": "600",
      });
      res.end();
      return false;
    }
  }
  if (!hasBearerToken(req, options)) throw problems.unauthorized();
  return true;
}
