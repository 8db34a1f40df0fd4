import { lstat, mkdir, readdir, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { dirname, isAbsolute, relative, resolve, sep } from "node:path";
import type { ListFilesOptions, SandboxFileEntry, SandboxFiles } from "./types.js";

function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return code === "ENOENT" || code === "ENOTDIR";
}

/** Files of a local sandbox: relative paths resolve against `workdir`, everything must stay under `root`. */
export class LocalFiles implements SandboxFiles {
  constructor(
    private readonly root: string,
    private readonly workdir: string,
  ) {}

  resolve(path: string): string {
    const full = isAbsolute(path) ? resolve(path) : resolve(this.workdir, path);
    const rel = relative(this.root, full);
    if (rel === ".." || rel.startsWith(`..${sep}`) || isAbsolute(rel)) {
      throw new Error(`sandbox path escapes the sandbox root: ${path}`);
    }
    return full;
  }

  async readFile(path: string): Promise<Uint8Array | undefined> {
    try {
      return await readFile(this.resolve(path));
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
  }

  async writeFile(path: string, data: Uint8Array | string): Promise<void> {
    const full = this.resolve(path);
    await mkdir(dirname(full), { recursive: true });
    await writeFile(full, data);
  }

  async list(dir: string, options: ListFilesOptions = {}): Promise<SandboxFileEntry[]> {
    const base = this.resolve(dir);
    const out: SandboxFileEntry[] = [];
    await walk(base, "", options.exclude ?? [], out);
    return out;
  }

  async remove(path: string): Promise<void> {
    await rm(this.resolve(path), { recursive: true, force: true });
  }

  async symlink(target: string, linkPath: string): Promise<void> {
    const full = this.resolve(linkPath);
    await mkdir(dirname(full), { recursive: true });
    await rm(full, { recursive: true, force: true });
    await symlink(this.resolve(target), full);
  }
}

async function walk(
  base: string,
  prefix: string,
  exclude: readonly string[],
  out: SandboxFileEntry[],
): Promise<void> {
  let names: string[];
  try {
    names = await readdir(prefix === "" ? base : `${base}/${prefix}`);
  } catch (error) {
    if (isMissing(error)) return;
    throw error;
  }
  for (const name of names.sort()) {
    if (exclude.includes(name)) continue;
    const path = prefix === "" ? name : `${prefix}/${name}`;
    const full = `${base}/${path}`;
    const info = await lstat(full);
    // Symlinks are reported by their target type but never followed, so cycles cannot loop.
    const type = info.isSymbolicLink()
      ? await linkTargetType(full)
      : info.isDirectory()
        ? "directory"
        : "file";
    if (type === undefined) continue;
    out.push({ path, type });
    if (type === "directory" && !info.isSymbolicLink()) await walk(base, path, exclude, out);
  }
}

async function linkTargetType(full: string): Promise<SandboxFileEntry["type"] | undefined> {
  try {
    return (await stat(full)).isDirectory() ? "directory" : "file";
  } catch {
    return undefined; // dangling link
  }
}
