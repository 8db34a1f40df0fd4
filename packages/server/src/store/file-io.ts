import fs from "node:fs";

/**
 * Writes `chunks` (`bytes` in all) at the descriptor's position, whole: a short write (the disk
 * filling up) is followed by one for the rest, and a write that makes no progress throws `ENOSPC`
 * naming `what` (the next write would report the filesystem's own error).
 */
export function writeAll(fd: number, chunks: Buffer[], bytes: number, what: string): void {
  let written = fs.writevSync(fd, chunks);
  while (written < bytes) {
    let skip = written;
    const rest: Buffer[] = [];
    for (const chunk of chunks) {
      if (skip >= chunk.length) skip -= chunk.length;
      else {
        rest.push(chunk.subarray(skip));
        skip = 0;
      }
    }
    const more = fs.writevSync(fd, rest);
    if (more === 0) throw Object.assign(new Error(`short write to ${what}`), { code: "ENOSPC" });
    written += more;
  }
}

/** Writes `buf` from `start` to `end` at the descriptor's position, whole, as `writeAll` does. */
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
