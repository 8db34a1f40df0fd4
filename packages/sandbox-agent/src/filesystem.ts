/**
 * The sandbox filesystem endpoints (`/v2/fs/*`). Every path is inside the server's filesystem root:
 * `/` (or a relative path) names the root itself, and paths that resolve outside it are refused.
 */
import { SandboxAgentHttpError } from "./errors.js";
import type { HttpTransport } from "./http.js";

export type FileType = "file" | "directory" | "symlink" | "other";

export interface FileStat {
  name: string;
  /** Path inside the root, starting with `/`. */
  path: string;
  type: FileType;
  size: number;
  /** Last modification, ISO 8601. */
  mtime: string;
}

export interface ListOptions {
  /** Everything below, breadth first (symlinks are not followed). */
  recursive?: boolean;
  /** Maximum number of entries (server default 10000). */
  limit?: number;
}

export interface DirectoryListing {
  path: string;
  entries: FileStat[];
  /** True when more entries exist than `limit`. */
  truncated: boolean;
}

export interface ReadOptions {
  /** Byte range, inclusive start, exclusive end. */
  range?: { start: number; end?: number };
  signal?: AbortSignal;
}

export interface WriteOptions {
  /** Replace an existing file (default true). */
  overwrite?: boolean;
  /** Create missing parent directories (default true). */
  parents?: boolean;
  signal?: AbortSignal;
}

/** What `writeFile` uploads; a `Blob` (e.g. a browser `File`) streams from disk. */
export type FileData = string | Uint8Array | Blob | ReadableStream<Uint8Array>;

export class FileSystem {
  constructor(private readonly http: HttpTransport) {}

  list(path: string, options: ListOptions = {}): Promise<DirectoryListing> {
    return this.http.json<DirectoryListing>({
      method: "GET",
      path: "/v2/fs/list",
      query: { path, recursive: options.recursive, limit: options.limit },
    });
  }

  /** Describes a file or directory (symlinks followed). */
  stat(path: string): Promise<FileStat> {
    return this.http.json<FileStat>({ method: "GET", path: "/v2/fs/stat", query: { path } });
  }

  /** Whether the path exists (any type). */
  async exists(path: string): Promise<boolean> {
    try {
      await this.stat(path);
      return true;
    } catch (error) {
      if (error instanceof SandboxAgentHttpError && error.status === 404) return false;
      throw error;
    }
  }

  /** The file's bytes as a stream (for large files). */
  async openRead(path: string, options: ReadOptions = {}): Promise<ReadableStream<Uint8Array>> {
    const response = await this.http.send({
      method: "GET",
      path: "/v2/fs/file",
      query: { path },
      headers: rangeHeader(options.range),
      signal: options.signal,
    });
    return response.body ?? new ReadableStream({ start: (c) => c.close() });
  }

  async readFile(path: string, options: ReadOptions = {}): Promise<Uint8Array> {
    const stream = await this.openRead(path, options);
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  async readText(path: string, options: ReadOptions = {}): Promise<string> {
    return new TextDecoder().decode(await this.readFile(path, options));
  }

  /** Streams `data` into the file (written atomically by the server). */
  writeFile(path: string, data: FileData, options: WriteOptions = {}): Promise<FileStat> {
    return this.http.json<FileStat>({
      method: "PUT",
      path: "/v2/fs/file",
      query: { path, overwrite: options.overwrite ?? true, parents: options.parents ?? true },
      headers: { "content-type": "application/octet-stream" },
      body: data,
      signal: options.signal,
    });
  }

  /** Creates a directory; with `recursive` (default true) parents too, and an existing one is fine. */
  mkdir(path: string, options: { recursive?: boolean } = {}): Promise<FileStat> {
    return this.http.json<FileStat>({
      method: "POST",
      path: "/v2/fs/mkdir",
      json: { path, recursive: options.recursive ?? true },
    });
  }

  /** Moves or renames; the destination must not exist unless `overwrite`. */
  move(from: string, to: string, options: { overwrite?: boolean } = {}): Promise<FileStat> {
    return this.http.json<FileStat>({
      method: "POST",
      path: "/v2/fs/move",
      json: { from, to, overwrite: options.overwrite ?? false },
    });
  }

  /** Deletes a file or symlink, or a directory (non-empty ones need `recursive`). */
  async remove(path: string, options: { recursive?: boolean } = {}): Promise<void> {
    await this.http.json({
      method: "DELETE",
      path: "/v2/fs/file",
      query: { path, recursive: options.recursive },
    });
  }
}

function rangeHeader(range: ReadOptions["range"]): Record<string, string> {
  if (!range) return {};
  const end = range.end === undefined ? "" : String(range.end - 1);
  return { range: `bytes=${range.start}-${end}` };
}
