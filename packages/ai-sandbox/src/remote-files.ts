import { readdir, readFile } from "node:fs/promises";
import { join, posix } from "node:path";
import type { FileSystem } from "sandbox-agent";
import type { ListFilesOptions, SandboxFileEntry, SandboxFiles } from "./types.js";

/** The server's maximum page; a directory beyond it is reported rather than silently cut. */
const MAX_ENTRIES = 100_000;

function isNotFound(error: unknown): boolean {
  return (error as { status?: unknown }).status === 404;
}

async function orMissing<T>(work: Promise<T>): Promise<T | undefined> {
  try {
    return await work;
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

/**
 * `SandboxFiles` over the sandbox-agent SDK's filesystem API. Sandbox paths (relative to `workdir`,
 * or absolute as the agent sees them) map to API paths relative to the server's `--fs-root`.
 */
export class RemoteFiles implements SandboxFiles {
  constructor(
    private readonly fs: FileSystem,
    readonly workdir: string,
    private readonly fsRoot: string,
  ) {}

  /** The API path (`/`-rooted at the fs root) of a sandbox path. */
  apiPath(path: string): string {
    const rel = posix.relative(this.fsRoot, posix.resolve(this.workdir, path));
    if (rel === ".." || rel.startsWith("../"))
      throw new Error(`sandbox path is outside the server fs root: ${path}`);
    return `/${rel}`;
  }

  async readFile(path: string): Promise<Uint8Array | undefined> {
    return orMissing(this.fs.readFile(this.apiPath(path)));
  }

  async writeFile(path: string, data: Uint8Array | string): Promise<void> {
    await this.fs.writeFile(this.apiPath(path), data);
  }

  /** Walks one directory per request so excluded trees are never fetched. */
  async list(dir: string, options: ListFilesOptions = {}): Promise<SandboxFileEntry[]> {
    const exclude = options.exclude ?? [];
    const out: SandboxFileEntry[] = [];
    const walk = async (prefix: string): Promise<void> => {
      const target = this.apiPath(prefix === "" ? dir : `${dir}/${prefix}`);
      const listing = await orMissing(this.fs.list(target, { limit: MAX_ENTRIES }));
      if (listing?.truncated)
        throw new Error(`sandbox directory has more than ${MAX_ENTRIES} entries: ${target}`);
      for (const entry of listing?.entries ?? []) {
        if (exclude.includes(entry.name) || (entry.type !== "file" && entry.type !== "directory")) continue;
        const path = prefix === "" ? entry.name : `${prefix}/${entry.name}`;
        out.push({ path, type: entry.type });
        if (entry.type === "directory") await walk(path);
      }
    };
    await walk("");
    return out;
  }

  async remove(path: string): Promise<void> {
    await orMissing(this.fs.remove(this.apiPath(path), { recursive: true }));
  }
}

/** Uploads a host directory file by file (the remote API has no archive upload). */
export async function uploadDirectory(files: SandboxFiles, hostDir: string, dest: string): Promise<void> {
  for (const entry of await readdir(hostDir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const full = join(entry.parentPath, entry.name);
    await files.writeFile(posix.join(dest, full.slice(hostDir.length + 1)), await readFile(full));
  }
}
