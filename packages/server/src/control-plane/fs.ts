import type { ServerResponse } from "node:http";
import { Readable } from "node:stream";
import { z } from "zod";
import { sendJson } from "../http/router.js";
import type { Logger } from "../log.js";
import {
  deleteEntry,
  entryInfo,
  entryOf,
  listDirectory,
  makeDirectory,
  moveEntry,
  statOf,
  type Entry,
} from "./fs-ops.js";
import { resolveInRoot, type RootedPath } from "./fs-paths.js";
import { FsRoot } from "./fs-root.js";
import { receiveFile, sendFile } from "./fs-transfer.js";
import { booleanQuery, defineRoute, type ResponseSpec, type RouteDef } from "./schema-route.js";

export interface FsDeps {
  /** Directory the API exposes; every path is relative to it. */
  root: string;
  /** Largest accepted upload in bytes; unset means unlimited. */
  maxUploadBytes?: number;
  logger: Logger;
}

const apiPath = z
  .string()
  .min(1)
  .max(4096)
  .refine((p) => !p.includes("\0"), "must not contain NUL bytes")
  .describe("Path relative to the filesystem root; a leading / means the root");

const entrySchema = z.object({
  name: z.string(),
  path: z.string().describe("Path relative to the root, starting with /"),
  type: z.enum(["file", "directory", "symlink", "other"]),
  size: z.number().int().nonnegative(),
  mtime: z.string().describe("Last modification, ISO 8601"),
}) satisfies z.ZodType<Entry>;

const listSchema = z.object({
  path: z.string(),
  entries: z.array(entrySchema),
  truncated: z.boolean().describe("True when more entries exist than `limit`"),
});

const MAX_WRITE_BODY = 64 * 1024 * 1024;
const TAGS = ["filesystem"];
const pathQuery = z.object({ path: apiPath });

const errors: Record<"escape" | "missing", Record<number, ResponseSpec>> & {
  conflict(description: string): Record<number, ResponseSpec>;
} = {
  escape: { 403: { description: "The path resolves outside the root (problem type path-escape)" } },
  missing: { 404: { description: "The path does not exist" } },
  conflict: (description) => ({ 409: { description } }),
};

async function respondWithEntry(
  res: ServerResponse,
  root: FsRoot,
  target: RootedPath,
  created: boolean,
): Promise<void> {
  sendJson(res, created ? 201 : 200, entryOf(target.display, await entryInfo(root, target)));
}

/** Routes under `/v2/fs/`; the root is resolved once, so a symlinked root works and cannot move. */
export function fsRoutes(deps: FsDeps): RouteDef[] {
  const root = new FsRoot(deps.root);
  if (!root.verifies) {
    deps.logger.warn(
      "filesystem API: /proc/self/fd is unavailable, so objects are reached by path; a local process " +
        "swapping directories for symlinks during a request could race the root checks",
    );
  }
  const resolve = (requested: string, follow = true) => resolveInRoot(root.path, requested, { follow });
  const written = {
    200: { description: "Replaced", schema: entrySchema },
    201: { description: "Created", schema: entrySchema },
  };
  return [
    defineRoute({
      method: "GET",
      path: "/v2/fs/list",
      summary: "List a directory",
      tags: TAGS,
      query: z.object({
        path: apiPath.default("/"),
        recursive: booleanQuery(false, "Include everything below, breadth first; symlinks are not followed"),
        limit: z.coerce
          .number()
          .int()
          .min(1)
          .max(100_000)
          .default(10_000)
          .describe("Maximum number of entries"),
      }),
      responses: {
        200: { description: "The entries, sorted by name per directory", schema: listSchema },
        ...errors.escape,
        ...errors.missing,
        ...errors.conflict("The path is not a directory"),
      },
      handler: async ({ res, query }) =>
        sendJson(
          res,
          200,
          await listDirectory(root, await resolve(query.path), query.recursive, query.limit),
        ),
    }),
    defineRoute({
      method: "GET",
      path: "/v2/fs/stat",
      summary: "Describe a file or directory (symlinks are followed)",
      tags: TAGS,
      query: pathQuery,
      responses: {
        200: { description: "The entry", schema: entrySchema },
        ...errors.escape,
        ...errors.missing,
      },
      handler: async ({ res, query }) => {
        const target = await resolve(query.path);
        sendJson(res, 200, entryOf(target.display, await statOf(root, target)));
      },
    }),
    defineRoute({
      method: "GET",
      path: "/v2/fs/file",
      summary: "Download a file (streamed; a single Range gives 206)",
      tags: TAGS,
      query: pathQuery,
      headers: z.object({ range: z.string().optional().describe("A single range, e.g. bytes=0-1023") }),
      responses: {
        200: { description: "The file's bytes", schema: "binary" },
        206: { description: "The requested range", schema: "binary" },
        ...errors.escape,
        ...errors.missing,
        ...errors.conflict("The path is a directory or not a regular file"),
        416: { description: "The range lies outside the file" },
      },
      handler: async ({ req, res, query }) => sendFile(root, req, res, await resolve(query.path)),
    }),
    defineRoute({
      method: "PUT",
      path: "/v2/fs/file",
      summary: "Upload a file (raw streamed body, written atomically)",
      tags: TAGS,
      query: z.object({
        path: apiPath,
        overwrite: booleanQuery(true, "Replace an existing file"),
        parents: booleanQuery(false, "Create missing parent directories"),
      }),
      body: "binary",
      responses: {
        ...written,
        ...errors.escape,
        404: { description: "The parent directory does not exist (and parents=false)" },
        ...errors.conflict("The file exists and overwrite=false, or the path is a directory"),
        413: { description: "The body exceeds the server's upload limit" },
      },
      handler: async ({ req, res, query }) => {
        const target = await resolve(query.path);
        const { created, info } = await receiveFile(root, req, target, {
          ...query,
          maxBytes: deps.maxUploadBytes,
        });
        sendJson(res, created ? 201 : 200, entryOf(target.display, info));
      },
    }),
    defineRoute({
      method: "POST",
      path: "/v2/fs/write",
      summary: "Write a small file from JSON (text or base64)",
      tags: TAGS,
      body: z
        .strictObject({
          path: apiPath,
          content: z.string(),
          encoding: z.enum(["utf8", "base64"]).default("utf8"),
          overwrite: z.boolean().default(true),
          parents: z.boolean().default(false),
        })
        .refine((b) => b.encoding !== "base64" || z.base64().safeParse(b.content).success, {
          message: "content is not valid base64",
          path: ["content"],
        }),
      maxBodyBytes: MAX_WRITE_BODY,
      responses: {
        ...written,
        ...errors.escape,
        404: { description: "The parent directory does not exist (and parents=false)" },
        ...errors.conflict("The file exists and overwrite=false, or the path is a directory"),
        413: { description: "The JSON body is too large; use PUT /v2/fs/file" },
      },
      handler: async ({ res, body }) => {
        const target = await resolve(body.path);
        const bytes = Buffer.from(body.content, body.encoding);
        const { created, info } = await receiveFile(root, Readable.from([bytes]), target, body);
        sendJson(res, created ? 201 : 200, entryOf(target.display, info));
      },
    }),
    defineRoute({
      method: "POST",
      path: "/v2/fs/mkdir",
      summary: "Create a directory",
      tags: TAGS,
      body: z.strictObject({
        path: apiPath,
        recursive: z
          .boolean()
          .default(false)
          .describe("Create parents; an existing directory is then not an error"),
      }),
      responses: {
        200: { description: "Already existed (recursive only)", schema: entrySchema },
        201: { description: "Created", schema: entrySchema },
        ...errors.escape,
        404: { description: "The parent does not exist (and recursive=false)" },
        ...errors.conflict("The path exists"),
      },
      handler: async ({ res, body }) => {
        const target = await resolve(body.path);
        await respondWithEntry(res, root, target, await makeDirectory(root, target, body.recursive));
      },
    }),
    defineRoute({
      method: "POST",
      path: "/v2/fs/move",
      summary: "Move or rename a file or directory (a symlink moves as a link)",
      tags: TAGS,
      body: z.strictObject({ from: apiPath, to: apiPath, overwrite: z.boolean().default(false) }),
      responses: {
        200: { description: "Moved; the entry at its new path", schema: entrySchema },
        ...errors.escape,
        ...errors.missing,
        ...errors.conflict("The destination exists (and overwrite=false), or replacing it is impossible"),
      },
      handler: async ({ res, body }) => {
        const [from, to] = [await resolve(body.from, false), await resolve(body.to, false)];
        await moveEntry(root, from, to, body.overwrite);
        await respondWithEntry(res, root, to, false);
      },
    }),
    defineRoute({
      method: "DELETE",
      path: "/v2/fs/file",
      summary: "Delete a file, symlink or directory",
      tags: TAGS,
      query: z.object({
        path: apiPath,
        recursive: booleanQuery(false, "Delete a non-empty directory with everything in it"),
      }),
      responses: {
        204: { description: "Deleted" },
        ...errors.escape,
        ...errors.missing,
        ...errors.conflict("The directory is not empty (and recursive=false)"),
      },
      handler: async ({ res, query }) => {
        await deleteEntry(root, await resolve(query.path, false), query.recursive);
        res.writeHead(204).end();
      },
    }),
  ];
}
