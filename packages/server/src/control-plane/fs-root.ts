import {
  closeSync,
  constants,
  fstat as fstatCallback,
  lstatSync,
  openSync,
  readlinkSync,
  realpathSync,
  statSync,
  type Stats,
} from "node:fs";
import { open, stat, type FileHandle } from "node:fs/promises";
import { promisify } from "node:util";
import path from "node:path";
import { isInside, pathEscape, type RootedPath } from "./fs-paths.js";

const fstat = promisify(fstatCallback);

/** Linux `O_PATH`: a descriptor that names an object without opening it (no side effects, no permission on the object itself). */
const O_PATH = 0o10000000;

/**
 * An object of the filesystem API held open, so that later steps act on this very object
 * instead of walking its path again (where a swapped-in symlink could lead elsewhere).
 */
export interface Pinned {
  /** Where the object is, as the kernel reports it for the descriptor. */
  readonly real: string;
  /** A path that reaches this object (no argument) or its entry `name` (a directory) from the descriptor. */
  at(name?: string): string;
  /** `fstat` of the object (symlinks were followed when it was opened). */
  stat(): Promise<Stats>;
  /** Opens the object itself, e.g. for reading; symlinks are not looked up again. */
  reopen(flags: number): Promise<FileHandle>;
  close(): void;
}

export interface PinOptions {
  /** Fail with ENOTDIR unless the object is a directory. */
  directory?: boolean;
  /** Do not follow a symlink in the last component (ELOOP, or ENOTDIR with `directory`). */
  noFollow?: boolean;
}

/**
 * The root of the filesystem API and the one way to reach objects under it.
 *
 * Checking a path and then using it are two steps, and a local process that swaps a directory
 * for a symlink between them would redirect the operation outside the root. So every operation
 * opens its object (or, to create, delete or rename an entry, the directory holding it) as an
 * `O_PATH` descriptor, asks the kernel where that descriptor really is (`readlink` of
 * `/proc/self/fd/N`), refuses it if that is outside the root, and then acts only through the
 * descriptor: `/proc/self/fd/N/name` resolves `name` inside the directory the descriptor holds,
 * without walking the path again (an `openat()` in a language that has none). A symlink swapped
 * in later no longer matters, and a symlink as the entry itself is never followed by `lstat`,
 * `unlink`, `rename`, `link`, `mkdir` or an `O_EXCL` create.
 *
 * Without `/proc` (not Linux, or /proc not mounted) objects are reached by path: the checks of
 * `resolveInRoot` still apply, but a concurrent swap could race them (`verifies` is false).
 */
export class FsRoot {
  /** The root's real path. */
  readonly path: string;
  /** Whether descriptors are verified through /proc/self/fd (see the class comment). */
  readonly verifies: boolean;

  constructor(root: string) {
    this.path = realpathSync(root);
    this.verifies = canVerify(this.path);
  }

  /**
   * Opens `absolute` (a real path under the root) and checks the opened object is inside the root.
   * Synchronous on purpose: an `O_PATH` open, a `readlink` and a `close` read no data, only the
   * directory entries `resolveInRoot` has just looked up (cached), and take a few microseconds,
   * where each thread-pool round trip of the async API costs tens.
   */
  pin(absolute: string, display: string, options: PinOptions = {}): Pinned {
    if (!this.verifies) {
      const info = options.noFollow ? lstatSync(absolute) : statSync(absolute);
      if (options.directory && !info.isDirectory()) {
        throw Object.assign(new Error("not a directory"), { code: "ENOTDIR" });
      }
      return byPath(absolute);
    }
    let flags = O_PATH;
    if (options.directory) flags |= constants.O_DIRECTORY;
    if (options.noFollow) flags |= constants.O_NOFOLLOW;
    const fd = openSync(absolute, flags);
    try {
      const real = readlinkSync(`/proc/self/fd/${fd}`);
      if (!isInside(this.path, real)) throw pathEscape(display);
      return byDescriptor(fd, real);
    } catch (error) {
      closeSync(fd);
      throw error;
    }
  }

  /**
   * Runs `use` with `absolute` pinned, then closes it. `use` must await everything it does through
   * the pin: once closed, the descriptor's number may name another file.
   */
  async with<T>(
    absolute: string,
    display: string,
    options: PinOptions,
    use: (pinned: Pinned) => Promise<T>,
  ): Promise<T> {
    const pinned = this.pin(absolute, display, options);
    try {
      return await use(pinned);
    } finally {
      pinned.close();
    }
  }

  /** Runs `use` with the directory holding `target` pinned and the entry's name in it. */
  withParent<T>(target: RootedPath, use: (parent: Pinned, name: string) => Promise<T>): Promise<T> {
    const parent = path.dirname(target.absolute);
    return this.with(parent, target.display, { directory: true }, (pinned) =>
      use(pinned, path.basename(target.absolute)),
    );
  }
}

function byDescriptor(fd: number, real: string): Pinned {
  const self = `/proc/self/fd/${fd}`;
  return {
    real,
    at: (name) => (name === undefined ? self : `${self}/${name}`),
    stat: () => fstat(fd),
    reopen: (flags) => open(self, flags),
    close: () => closeSync(fd),
  };
}

function byPath(absolute: string): Pinned {
  return {
    real: absolute,
    at: (name) => (name === undefined ? absolute : path.join(absolute, name)),
    stat: () => stat(absolute),
    reopen: (flags) => open(absolute, flags),
    close: () => {},
  };
}

/** Whether this system reports where a descriptor is through /proc/self/fd (Linux with /proc). */
function canVerify(root: string): boolean {
  if (process.platform !== "linux") return false;
  try {
    const fd = openSync(root, O_PATH | constants.O_DIRECTORY);
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === root;
    } finally {
      closeSync(fd);
    }
  } catch {
    return false;
  }
}
