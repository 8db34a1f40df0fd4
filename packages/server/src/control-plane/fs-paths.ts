import { lstat, readlink, realpath } from "node:fs/promises";
import path from "node:path";
import { ProblemError, problems } from "../http/problem.js";
import { errnoOf, onPath } from "./fs-problems.js";

/** A path of the filesystem API, checked to stay inside the root. */
export interface RootedPath {
  /** Absolute host path to operate on (symlinks resolved as `follow` asked). */
  absolute: string;
  /** The path as the API shows it: `/`-separated, relative to the root, starting with `/`. */
  display: string;
  /** True when this is the root itself. */
  isRoot: boolean;
}

export interface ResolveOptions {
  /**
   * Resolve a symlink in the last component (read, write, list) or keep it (delete, move), so that
   * deleting a link deletes the link. Parent directories are always resolved.
   */
  follow: boolean;
}

const MAX_LINK_HOPS = 40;

export function pathEscape(requested: string): ProblemError {
  return new ProblemError(
    403,
    "path-escape",
    "Path Escapes Root",
    `${JSON.stringify(requested)} resolves outside the filesystem root.`,
  );
}

/** Whether `candidate` (absolute, normalized) is `root` or inside it. */
export function isInside(root: string, candidate: string): boolean {
  const rel = path.relative(root, candidate);
  return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
}

/**
 * Resolves API path `requested` against `root` (itself already a real path). `..`, absolute
 * escapes and symlinks leading outside the root are rejected with 403 `path-escape`: the deepest
 * existing ancestor is resolved with `realpath` and the components below it do not exist yet,
 * so they cannot be links.
 */
export async function resolveInRoot(
  root: string,
  requested: string,
  options: ResolveOptions,
): Promise<RootedPath> {
  if (requested.includes("\0")) throw problems.badRequest("Paths must not contain NUL bytes.");
  // A leading "/" means the root, so every API path is relative to it.
  const lexical = path.resolve(root, `.${path.sep}${requested}`);
  if (!isInside(root, lexical)) throw pathEscape(requested);
  const display = "/" + path.relative(root, lexical).split(path.sep).join("/");
  if (lexical === root) return { absolute: root, display, isRoot: true };
  const name = path.basename(lexical);
  const absolute = await onPath(display, async () => {
    const parent = await resolveExisting(root, path.dirname(lexical), requested);
    return options.follow
      ? await resolveExisting(root, path.join(parent, name), requested)
      : path.join(parent, name);
  });
  return { absolute, display, isRoot: absolute === root };
}

/** Real path of `target` (which may not exist yet), checked to be inside `root`. */
async function resolveExisting(root: string, target: string, requested: string): Promise<string> {
  let current = target;
  for (let hop = 0; hop < MAX_LINK_HOPS; hop++) {
    const { existing, rest } = await deepestExisting(current);
    let real: string;
    try {
      real = await realpath(existing);
    } catch (error) {
      const code = errnoOf(error);
      if (code !== "ENOENT" && code !== "ENOTDIR") throw error;
      // A dangling symlink: continue from where it points, so a later write cannot follow it outside.
      // Not a link (any more): the path changed since lstat, so look again.
      const link = await readlink(existing).catch(() => undefined);
      if (link !== undefined) current = path.join(path.resolve(path.dirname(existing), link), ...rest);
      continue;
    }
    const resolved = path.join(real, ...rest);
    if (!isInside(root, real) || !isInside(root, resolved)) throw pathEscape(requested);
    return resolved;
  }
  throw Object.assign(new Error("too many symbolic links or concurrent changes"), { code: "ELOOP" });
}

/** Splits `target` into its deepest existing ancestor (by lstat) and the missing components below. */
async function deepestExisting(target: string): Promise<{ existing: string; rest: string[] }> {
  const rest: string[] = [];
  let current = target;
  for (;;) {
    try {
      await lstat(current);
      return { existing: current, rest };
    } catch (error) {
      const code = errnoOf(error);
      if (code !== "ENOENT" && code !== "ENOTDIR") throw error;
      const parent = path.dirname(current);
      if (parent === current) return { existing: current, rest };
      rest.unshift(path.basename(current));
      current = parent;
    }
  }
}
