import fs from "node:fs";

/**
 * Writes `buf` from `start` to `end` at the descriptor's position, whole: a short write (the disk
 * filling up) is followed by one for the rest, and a write that makes no progress throws `ENOSPC`
 * naming `what` (the next write would report the filesystem's own error).
 */
export function writeRange(fd: number, buf: Buffer, start: number, end: number, what: string): void {
  for (let at = start; at < end;) {
    const written = fs.writeSync(fd, buf, at, end - at);
    if (written === 0) throw Object.assign(new Error(`short write to ${what}`), { code: "ENOSPC" });
    at += written;
  }
}

/** Closes `fd`, ignoring that it was closed already. */
export function closeQuietly(fd: number): void {
  try {
    fs.closeSync(fd);
  } catch {
    // Already closed.
  }
}

/**
 * Syncs directory `dir`, so that a file renamed into it (a snapshot or a rewritten journal put over
 * the old one) stays renamed after a power loss: `fdatasync` of the file covers its bytes, not the
 * directory entry that names it.
 */
export function syncDirectorySync(dir: string): void {
  const fd = fs.openSync(dir, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Deletes `file`, if it is there. Not `fs.rmSync`: Node 20's loads `internal/fs/rimraf` on its
 * first call, a built-in that compiles without Node's code cache once the server's V8 flags are set
 * (`server-v8-flags.ts`), in the middle of a connection's requests.
 */
export function removeFile(file: string): void {
  try {
    fs.unlinkSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
}

/**
 * Deletes directory `dir` and what is in it, if it is there: with `unlink`s and an `rmdir` for a
 * directory of files (a connection's log), with `fs.rmSync` only if that fails (something else in it).
 */
export function removeDir(dir: string): void {
  try {
    for (const name of fs.readdirSync(dir)) removeFile(`${dir}/${name}`);
    fs.rmdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") fs.rmSync(dir, { recursive: true, force: true });
  }
}
