import { nodeCrypto } from "../lazy-builtins.js";
import { constants, type Stats } from "node:fs";
import { lstat, rename, unlink } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import path from "node:path";
import { Transform, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { ProblemError, problems } from "../http/problem.js";
import { ensureDirectory, inParent, renameNoReplace, writeNewFile } from "./fs-ops.js";
import type { RootedPath } from "./fs-paths.js";
import { alreadyExists, errnoOf, isADirectory, notAFile, onPath } from "./fs-problems.js";
import type { FsRoot } from "./fs-root.js";

const CONTENT_TYPES: Record<string, string> = {
  ".txt": "text/plain; charset=utf-8",
  ".md": "text/markdown; charset=utf-8",
  ".html": "text/html; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".csv": "text/csv; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".ts": "text/plain; charset=utf-8",
  ".json": "application/json",
  ".xml": "application/xml",
  ".yaml": "application/yaml",
  ".yml": "application/yaml",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".pdf": "application/pdf",
  ".zip": "application/zip",
  ".gz": "application/gzip",
  ".tar": "application/x-tar",
  ".wasm": "application/wasm",
};

export function contentTypeOf(file: string): string {
  return CONTENT_TYPES[path.extname(file).toLowerCase()] ?? "application/octet-stream";
}

type ByteRange = { start: number; end: number };

/**
 * A single `bytes=` range (RFC 9110 §14.1.2). Multiple or malformed ranges are ignored (the whole
 * file is sent, which the RFC allows); a syntactically valid range outside the file is unsatisfiable.
 */
export function parseRange(
  header: string | undefined,
  size: number,
): ByteRange | "unsatisfiable" | undefined {
  const m = header === undefined ? null : /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) return undefined;
  if (m[1] === "") {
    const suffix = Number(m[2]);
    if (suffix === 0 || size === 0) return "unsatisfiable";
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || start > end) return "unsatisfiable";
  return { start, end };
}

function isClientGone(error: unknown): boolean {
  return errnoOf(error) === "ERR_STREAM_PREMATURE_CLOSE" || errnoOf(error) === "ECONNRESET";
}

/** Streams a regular file, honouring a single `Range`; never holds more than a stream chunk in memory. */
export async function sendFile(
  root: FsRoot,
  req: IncomingMessage,
  res: ServerResponse,
  target: RootedPath,
): Promise<void> {
  // O_NONBLOCK so that opening a FIFO cannot hang the request; regular files ignore it.
  const handle = await onPath(target.display, () =>
    root.with(target.absolute, target.display, {}, (pinned) =>
      pinned.reopen(constants.O_RDONLY | constants.O_NONBLOCK),
    ),
  );
  let streaming = false;
  try {
    const info = await handle.stat();
    if (info.isDirectory()) throw isADirectory(target.display);
    if (!info.isFile()) throw notAFile(target.display);
    const range = parseRange(req.headers.range, info.size);
    if (range === "unsatisfiable") {
      throw new ProblemError(
        416,
        "range-not-satisfiable",
        "Range Not Satisfiable",
        `${req.headers.range} is outside the file (${info.size} bytes).`,
        { size: info.size },
        { "content-range": `bytes */${info.size}` },
      );
    }
    const { start, end } = range ?? { start: 0, end: info.size - 1 };
    res.writeHead(range ? 206 : 200, {
      "content-type": contentTypeOf(target.absolute),
      "content-length": String(end - start + 1),
      "accept-ranges": "bytes",
      "last-modified": info.mtime.toUTCString(),
      // A sandbox file opened in a browser (e.g. HTML an agent wrote) must not run as this server's
      // origin, which the inspector's API calls share.
      "content-security-policy": "sandbox",
      "x-content-type-options": "nosniff",
      ...(range ? { "content-range": `bytes ${start}-${end}/${info.size}` } : {}),
    });
    if (info.size === 0) return void res.end();
    streaming = true;
    await pipeline(handle.createReadStream({ start, end, autoClose: true }), res);
  } catch (error) {
    if (streaming && isClientGone(error)) return;
    throw error;
  } finally {
    if (!streaming) await handle.close();
  }
}

export interface ReceiveOptions {
  overwrite: boolean;
  /** Create missing parent directories. */
  parents: boolean;
  /** Reject bodies larger than this (413). */
  maxBytes?: number;
}

/** Fails the stream with 413 once more than `limit` bytes have passed. */
function byteLimit(limit: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      done(seen > limit ? problems.tooLarge(limit) : null, chunk);
    },
  });
}

/**
 * Streams `source` into a temp file next to `target`, then renames it into place, so readers never
 * see a half-written file and a failed upload leaves nothing behind. Every step goes through the
 * pinned parent directory (see `FsRoot`). Returns whether the file was created, and what it is now.
 */
export async function receiveFile(
  root: FsRoot,
  source: Readable,
  target: RootedPath,
  options: ReceiveOptions,
): Promise<{ created: boolean; info: Stats }> {
  if (target.isRoot) throw isADirectory(target.display);
  if (options.parents) await ensureDirectory(root, path.dirname(target.absolute), target.display);
  return inParent(root, target, async (parent, name) => {
    const existing = await lstat(parent.at(name)).catch((error: unknown) => {
      if (errnoOf(error) !== "ENOENT") throw error;
    });
    if (existing?.isDirectory()) throw isADirectory(target.display);
    if (existing && !options.overwrite) throw alreadyExists(target.display);
    const temp = parent.at(`.${name}.${nodeCrypto().randomUUID()}.upload`);
    try {
      await writeNewFile(temp, source, {
        mode: existing?.isFile() ? existing.mode & 0o7777 : undefined,
        through: options.maxBytes === undefined ? [] : [byteLimit(options.maxBytes)],
      });
      // Without `overwrite`, a concurrent creator wins (409): no check-then-write race.
      if (options.overwrite) await rename(temp, parent.at(name));
      else await renameNoReplace(temp, parent.at(name), false);
    } catch (error) {
      await unlink(temp).catch(() => {});
      throw error;
    }
    return { created: existing === undefined, info: await lstat(parent.at(name)) };
  });
}
