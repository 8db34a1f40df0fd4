import { readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";

const POLL_MS = 300;
/** A lock file younger than this may still be being written by its owner. */
const FRESH_MS = 5_000;

/**
 * Runs `run` holding `<dir>/.install.lock`, so a CLI `install-agent` and a server installing the
 * same agent never run npm in one directory at once. A lock whose owner is gone (or that is older
 * than `timeoutMs`, the longest an install may take) is taken over. Returns undefined if the lock
 * could not be had within `timeoutMs`.
 */
export async function withInstallLock<T>(
  dir: string,
  timeoutMs: number,
  run: () => Promise<T>,
): Promise<{ value: T } | undefined> {
  const file = path.join(dir, ".install.lock");
  const deadline = Date.now() + timeoutMs;
  while (!tryAcquire(file, timeoutMs)) {
    if (Date.now() > deadline) return undefined;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  try {
    return { value: await run() };
  } finally {
    rmSync(file, { force: true });
  }
}

function tryAcquire(file: string, maxAgeMs: number): boolean {
  if (create(file)) return true;
  if (!isStale(file, maxAgeMs)) return false;
  rmSync(file, { force: true });
  return create(file);
}

function create(file: string): boolean {
  try {
    writeFileSync(file, String(process.pid), { flag: "wx" });
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  }
}

function isStale(file: string, maxAgeMs: number): boolean {
  let age: number;
  let pid: number;
  try {
    age = Date.now() - statSync(file).mtimeMs;
    pid = Number(readFileSync(file, "utf8"));
  } catch {
    return false; // released meanwhile: the next attempt creates it
  }
  if (age > maxAgeMs) return true;
  if (!Number.isInteger(pid) || pid <= 0) return age > FRESH_MS;
  return !isAlive(pid);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
