import { nodeCrypto } from "../lazy-builtins.js";
import { constants, type Stats } from "node:fs";
import {
  link,
  lstat,
  mkdir,
  open,
  readdir,
  readlink,
  rename,
  rmdir,
  stat,
  symlink,
  unlink,
  type FileHandle,
} from "node:fs/promises";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { ProblemError, problems } from "../http/problem.js";
import type { RootedPath } from "./fs-paths.js";
import { alreadyExists, errnoOf, fsProblem, notADirectory, notAFile, onPath } from "./fs-problems.js";
import type { FsRoot, Pinned } from "./fs-root.js";

// Every operation here reaches its objects through `FsRoot` (pinned, verified descriptors), so a
// symlink swapped into the path while it runs cannot lead it outside the root. Paths handed
// between steps are real paths the previous step verified (`Pinned.real`).

export type EntryType = "file" | "directory" | "symlink" | "other";

export interface Entry {
  name: string;
  /** Path relative to the root, starting with `/`. */
  path: string;
  type: EntryType;
  size: number;
  /** Last modification, ISO 8601. */
  mtime: string;
}

export interface Listing {
  path: string;
  entries: Entry[];
  truncated: boolean;
}

function typeOf(info: Stats): EntryType {
  if (info.isSymbolicLink()) return "symlink";
  if (info.isDirectory()) return "directory";
  return info.isFile() ? "file" : "other";
}

export function entryOf(display: string, info: Stats): Entry {
  return {
    name: path.posix.basename(display),
    path: display,
    type: typeOf(info),
    size: info.size,
    mtime: info.mtime.toISOString(),
  };
}

function childPath(parent: string, name: string): string {
  return parent === "/" ? `/${name}` : `${parent}/${name}`;
}

const missing = (error: unknown): undefined => {
  if (errnoOf(error) === "ENOENT") return undefined;
  throw error;
};

/** A swap or a removal under a running operation turned an entry into something else. */
function changed(display: string): ProblemError {
  return new ProblemError(
    409,
    "changed-concurrently",
    "Changed Concurrently",
    `${display} changed while the server was working on it; try again.`,
  );
}

/** Runs `use` in the directory holding `target`: a missing parent is 404, a parent that is a file 409. */
export async function inParent<T>(
  root: FsRoot,
  target: RootedPath,
  use: (parent: Pinned, name: string) => Promise<T>,
): Promise<T> {
  let entered = false;
  try {
    return await root.withParent(target, (parent, name) => {
      entered = true;
      return use(parent, name);
    });
  } catch (error) {
    if (entered) throw fsProblem(error, target.display);
    const code = errnoOf(error);
    if (code === "ENOENT")
      throw problems.notFound(`The parent directory of ${target.display} does not exist.`);
    if (code === "ENOTDIR") {
      const parentIsFile = await stat(path.dirname(target.absolute)).then(
        (i) => !i.isDirectory(),
        () => false,
      );
      if (parentIsFile) throw notADirectory(`The parent of ${target.display}`);
    }
    throw fsProblem(error, target.display);
  }
}

/** The entry `target` names, not following a symlink in its last component. */
export function entryInfo(root: FsRoot, target: RootedPath): Promise<Stats> {
  if (target.isRoot) return onPath(target.display, () => root.with(root.path, "/", {}, (r) => r.stat()));
  return inParent(root, target, (parent, name) => lstat(parent.at(name)));
}

/** The object `target` resolves to (symlinks followed). */
export function statOf(root: FsRoot, target: RootedPath): Promise<Stats> {
  return onPath(target.display, () =>
    root.with(target.absolute, target.display, {}, (pinned) => pinned.stat()),
  );
}

/** Lists `dir` (breadth first when recursive, never following symlinks) up to `limit` entries. */
export async function listDirectory(
  root: FsRoot,
  dir: RootedPath,
  recursive: boolean,
  limit: number,
): Promise<Listing> {
  const entries: Entry[] = [];
  const queue: { real: string; display: string }[] = [];
  const visit = async (pinned: Pinned, display: string): Promise<boolean> => {
    const names = await onPath(display, () => readdir(pinned.at()));
    for (const name of names.sort()) {
      if (entries.length === limit) return true;
      // An entry may vanish between readdir and lstat; skip it rather than fail the listing.
      const info = await lstat(pinned.at(name)).catch(() => undefined);
      if (!info) continue;
      entries.push(entryOf(childPath(display, name), info));
      if (recursive && info.isDirectory())
        queue.push({ real: path.join(pinned.real, name), display: childPath(display, name) });
    }
    return false;
  };
  const truncated = await onPath(dir.display, () =>
    root.with(dir.absolute, dir.display, {}, async (pinned) => {
      if (!(await pinned.stat()).isDirectory()) throw notADirectory(dir.display);
      return visit(pinned, dir.display);
    }),
  );
  if (truncated) return { path: dir.display, entries, truncated };
  while (queue.length > 0) {
    const next = queue.shift()!;
    // A directory replaced (by a symlink or a file) since it was listed is skipped, like a vanished entry.
    const full = await root
      .with(next.real, next.display, { directory: true, noFollow: true }, (pinned) =>
        visit(pinned, next.display),
      )
      .catch((error: unknown) => {
        if (["ENOENT", "ENOTDIR", "ELOOP"].includes(errnoOf(error) ?? "")) return false;
        throw fsProblem(error, next.display);
      });
    if (full) return { path: dir.display, entries, truncated: true };
  }
  return { path: dir.display, entries, truncated: false };
}

/** mkdir that answers whether it created the directory (an existing one is fine when recursive). */
export async function makeDirectory(root: FsRoot, target: RootedPath, recursive: boolean): Promise<boolean> {
  if (target.isRoot) {
    if (recursive) return false;
    throw alreadyExists(target.display);
  }
  if (recursive) await ensureDirectory(root, path.dirname(target.absolute), target.display);
  return inParent(root, target, async (parent, name) => {
    try {
      await mkdir(parent.at(name));
      return true;
    } catch (error) {
      if (errnoOf(error) !== "EEXIST") throw error;
      if (recursive && (await lstat(parent.at(name))).isDirectory()) return false;
      throw alreadyExists(target.display);
    }
  });
}

/** Creates directory `dir` (a real path under the root) and its missing parents, one verified level at a time. */
export async function ensureDirectory(root: FsRoot, dir: string, display: string): Promise<void> {
  if (dir === root.path) return;
  try {
    return await root.with(dir, display, { directory: true }, async () => {});
  } catch (error) {
    if (errnoOf(error) !== "ENOENT") throw fsProblem(error, display);
  }
  await ensureDirectory(root, path.dirname(dir), display);
  await onPath(display, () =>
    root.with(path.dirname(dir), display, { directory: true }, (parent) =>
      mkdir(parent.at(path.basename(dir))).catch((error: unknown) => {
        if (errnoOf(error) !== "EEXIST") throw error; // created meanwhile: the next pin checks it is a directory
      }),
    ),
  );
}

/** Deletes a file, a symlink (never its target) or a directory (with its contents when `recursive`). */
export async function deleteEntry(root: FsRoot, target: RootedPath, recursive: boolean): Promise<void> {
  if (target.isRoot) throw problems.forbidden("The filesystem root cannot be deleted.");
  await inParent(root, target, async (parent, name) => {
    const info = await lstat(parent.at(name));
    if (!info.isDirectory()) return unlink(parent.at(name));
    if (recursive) await emptyDirectory(root, path.join(parent.real, name), target.display);
    await rmdir(parent.at(name));
  });
}

/**
 * Deletes everything in `dir`. Each directory is pinned (without following a symlink) while its
 * entries are removed through the descriptor, and released before descending, so a deep tree
 * needs no more than two descriptors at a time.
 */
async function emptyDirectory(root: FsRoot, dir: string, display: string): Promise<void> {
  const subdirectories = await inDirectory(root, dir, display, async (pinned) => {
    const found: string[] = [];
    for (const name of await readdir(pinned.at())) {
      const info = await lstat(pinned.at(name)).catch(missing);
      if (info?.isDirectory()) found.push(name);
      else if (info) await unlink(pinned.at(name)).catch(missing);
    }
    return found;
  });
  for (const name of subdirectories) {
    await emptyDirectory(root, path.join(dir, name), display);
    await inDirectory(root, dir, display, (pinned) => rmdir(pinned.at(name)).then(() => {}, missing));
  }
}

/** Pins directory `dir` of a tree walk; one replaced by a symlink or a file meanwhile is a 409. */
async function inDirectory<T>(
  root: FsRoot,
  dir: string,
  display: string,
  use: (pinned: Pinned) => Promise<T>,
): Promise<T> {
  try {
    return await root.with(dir, display, { directory: true, noFollow: true }, use);
  } catch (error) {
    if (errnoOf(error) === "ENOTDIR" || errnoOf(error) === "ELOOP") throw changed(display);
    throw error;
  }
}

/**
 * Renames `from` to `to` (paths through pinned directories) unless `to` exists, atomically:
 * a hard link for anything but a directory (link fails if `to` exists, then the old name goes);
 * for a directory, an empty placeholder is created first (fails if `to` exists) and renamed over,
 * which rename(2) allows only onto an empty directory. Node has no `renameat2(RENAME_NOREPLACE)`.
 */
export async function renameNoReplace(from: string, to: string, isDirectory: boolean): Promise<void> {
  if (isDirectory) {
    await mkdir(to);
    try {
      await rename(from, to);
    } catch (error) {
      await rmdir(to).catch(() => {});
      throw error;
    }
    return;
  }
  try {
    await link(from, to);
  } catch (error) {
    const code = errnoOf(error);
    if (code === "EEXIST" || code === "EXDEV" || code === "ENOENT") throw error;
    // No hard links here (some filesystems, protected_hardlinks): check, then rename.
    if (await lstat(to).then(() => true, missing)) throw alreadyExistsError();
    return rename(from, to);
  }
  await unlink(from);
}

function alreadyExistsError(): Error {
  return Object.assign(new Error("already exists"), { code: "EEXIST" });
}

/** Moves `from` to `to` (a symlink moves as a link); across filesystems, copies then deletes. */
export async function moveEntry(
  root: FsRoot,
  from: RootedPath,
  to: RootedPath,
  overwrite: boolean,
): Promise<void> {
  if (from.isRoot) throw problems.forbidden("The filesystem root cannot be moved.");
  if (to.isRoot) throw alreadyExists(to.display);
  await inParent(root, from, (source, fromName) =>
    inParent(root, to, async (destination, toName) => {
      const info = await onPath(from.display, () => lstat(source.at(fromName)));
      if (path.join(source.real, fromName) === path.join(destination.real, toName)) return;
      const [a, b] = [source.at(fromName), destination.at(toName)];
      try {
        await (overwrite ? rename(a, b) : renameNoReplace(a, b, info.isDirectory()));
      } catch (error) {
        if (errnoOf(error) !== "EXDEV") throw error;
        await moveAcrossDevices(root, { source, fromName, destination, toName, info, overwrite }, to.display);
      }
    }),
  );
}

interface Relocation {
  source: Pinned;
  fromName: string;
  destination: Pinned;
  toName: string;
  info: Stats;
  overwrite: boolean;
}

/** rename(2) cannot cross mount points: copy next to the destination, put the copy in place, delete the original. */
async function moveAcrossDevices(root: FsRoot, move: Relocation, display: string): Promise<void> {
  const { source, fromName, destination, toName, info } = move;
  const temp = `.${toName}.${nodeCrypto().randomUUID()}.move`;
  try {
    await copyEntry(root, source, fromName, destination, temp, display);
    if (move.overwrite) await rename(destination.at(temp), destination.at(toName));
    else await renameNoReplace(destination.at(temp), destination.at(toName), info.isDirectory());
  } catch (error) {
    await removeQuietly(root, destination, temp, display);
    throw error;
  }
  if (!info.isDirectory()) return unlink(source.at(fromName));
  await emptyDirectory(root, path.join(source.real, fromName), display);
  await rmdir(source.at(fromName));
}

async function removeQuietly(root: FsRoot, parent: Pinned, name: string, display: string): Promise<void> {
  const info = await lstat(parent.at(name)).catch(() => undefined);
  if (!info) return;
  if (!info.isDirectory()) return unlink(parent.at(name)).catch(() => {});
  await emptyDirectory(root, path.join(parent.real, name), display).catch(() => {});
  await rmdir(parent.at(name)).catch(() => {});
}

/** Copies entry `name` of `from` to a new entry `newName` of `to`, a directory with everything in it. */
async function copyEntry(
  root: FsRoot,
  from: Pinned,
  name: string,
  to: Pinned,
  newName: string,
  display: string,
): Promise<void> {
  const info = await lstat(from.at(name));
  if (!info.isDirectory()) return copyNonDirectory(from, name, to, newName, info, display);
  await mkdir(to.at(newName), info.mode & 0o7777);
  await copyContents(root, path.join(from.real, name), path.join(to.real, newName), display);
}

/** Copies what directory `sourceDir` holds into `targetDir`, one pinned pair of directories at a time. */
async function copyContents(
  root: FsRoot,
  sourceDir: string,
  targetDir: string,
  display: string,
): Promise<void> {
  const subdirectories = await inDirectory(root, sourceDir, display, (source) =>
    inDirectory(root, targetDir, display, async (target) => {
      const found: string[] = [];
      for (const name of await readdir(source.at())) {
        const info = await lstat(source.at(name));
        if (!info.isDirectory()) {
          await copyNonDirectory(source, name, target, name, info, display);
          continue;
        }
        await mkdir(target.at(name), info.mode & 0o7777);
        found.push(name);
      }
      return found;
    }),
  );
  for (const name of subdirectories)
    await copyContents(root, path.join(sourceDir, name), path.join(targetDir, name), display);
}

async function copyNonDirectory(
  from: Pinned,
  name: string,
  to: Pinned,
  newName: string,
  info: Stats,
  display: string,
): Promise<void> {
  if (info.isSymbolicLink()) return symlink(await readlink(from.at(name)), to.at(newName));
  if (!info.isFile()) throw notAFile(`${display} (an entry that cannot be copied across filesystems)`);
  const source = await open(from.at(name), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    await writeNewFile(to.at(newName), Readable.from(chunksOf(source)), { mode: info.mode & 0o7777 });
  } finally {
    await source.close();
  }
}

// FileHandle streams with `autoClose: false` keep a reference to the handle that makes its
// close() wait forever, so the handles below are read and written directly.

async function* chunksOf(handle: FileHandle): AsyncGenerator<Buffer> {
  for (;;) {
    const buffer = Buffer.allocUnsafe(64 * 1024);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
    if (bytesRead === 0) return;
    yield buffer.subarray(0, bytesRead);
  }
}

/** A writable that writes into `handle` and leaves it open. */
function sinkInto(handle: FileHandle): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      void (async () => {
        for (let at = 0; at < chunk.length;) at += (await handle.write(chunk, at)).bytesWritten;
      })().then(() => done(), done);
    },
  });
}

export interface NewFileOptions {
  /** Exact permission bits of the new file (umask not applied); default 0o666 less the umask. */
  mode?: number;
  /** Transforms between the source and the file, e.g. a byte limit. */
  through?: NodeJS.ReadWriteStream[];
}

/** Streams `source` into a file that must not exist yet (`O_EXCL`: never through a symlink). */
export async function writeNewFile(
  file: string,
  source: Readable,
  options: NewFileOptions = {},
): Promise<void> {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
  const handle = await open(file, flags, options.mode ?? 0o666);
  try {
    await pipeline([source, ...(options.through ?? []), sinkInto(handle)]);
    if (options.mode !== undefined) await handle.chmod(options.mode);
  } finally {
    await handle.close();
  }
}
