import { stat } from "node:fs/promises";
import { createReadStream, type Stats } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { problems } from "../http/problem.js";

/** `immutable`: content-hashed names, cached for a year. `revalidate`: checked on every use (ETag). */
export type CachePolicy = "immutable" | "revalidate";

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".json": "application/json",
  ".txt": "text/plain; charset=utf-8",
};

/**
 * The page talks only to this server and runs only its own scripts: no CDN, font or beacon can load.
 * `connect-src 'self'` covers the terminal's WebSocket (same host and port, `ws:`/`wss:`).
 * Inline styles are allowed because xterm.js's DOM renderer needs them: it writes its theme and cell
 * rules into `<style>` elements and 24-bit colours into `style` attributes; refused, each one is a
 * CSP violation (a truecolor screen rendered ~5× slower, in the wrong colours). A style cannot run
 * script or, with the other directives, load anything from elsewhere; agent markdown is sanitized
 * without styles.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const CACHE_CONTROL: Record<CachePolicy, string> = {
  immutable: "public, max-age=31536000, immutable",
  revalidate: "no-cache",
};

/** Pre-compressed siblings written by the build, best first. */
const ENCODINGS = [
  { name: "br", suffix: ".br" },
  { name: "gzip", suffix: ".gz" },
] as const;

/** The encodings `accept-encoding` allows (`q=0` refuses one). */
function acceptedEncodings(header: string | undefined): Set<string> {
  const accepted = new Set<string>();
  for (const part of (header ?? "").split(",")) {
    const [name, ...params] = part.trim().toLowerCase().split(";");
    const refused = params.some((p) => /^\s*q=0(\.0*)?\s*$/.test(p));
    if (name && !refused) accepted.add(name);
  }
  return accepted;
}

async function statFile(file: string): Promise<Stats | undefined> {
  const info = await stat(file).catch(() => undefined);
  return info?.isFile() ? info : undefined;
}

/** Sends one built file with its content type, caching headers and the best pre-compressed variant. */
export async function sendStatic(
  req: IncomingMessage,
  res: ServerResponse,
  file: string,
  cache: CachePolicy,
): Promise<void> {
  const info = await statFile(file);
  if (!info) throw problems.notFound(`No inspector file ${path.basename(file)}.`);
  const etag = `"${info.size.toString(36)}-${Math.trunc(info.mtimeMs).toString(36)}"`;
  const headers: Record<string, string | number> = {
    "content-type": CONTENT_TYPES[path.extname(file)] ?? "application/octet-stream",
    "cache-control": CACHE_CONTROL[cache],
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    vary: "accept-encoding",
    etag,
  };
  if (req.headers["if-none-match"] === etag) {
    res.writeHead(304, headers);
    return void res.end();
  }
  let body = { file, size: info.size };
  const accepted = acceptedEncodings(req.headers["accept-encoding"]);
  for (const encoding of ENCODINGS) {
    if (!accepted.has(encoding.name)) continue;
    const variant = await statFile(file + encoding.suffix);
    if (!variant) continue;
    body = { file: file + encoding.suffix, size: variant.size };
    headers["content-encoding"] = encoding.name;
    break;
  }
  res.writeHead(200, { ...headers, "content-length": body.size });
  await pipeline(createReadStream(body.file), res).catch((error: unknown) => {
    // A reader that went away (tab closed, navigation) is not a server error.
    if (!(error instanceof Error && "code" in error && error.code === "ERR_STREAM_PREMATURE_CLOSE"))
      throw error;
  });
}
