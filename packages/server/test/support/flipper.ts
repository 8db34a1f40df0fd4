import { spawn } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { tempDir } from "@sandbox-agent/testkit";

const FLIPPER = fileURLToPath(new URL("./flip-symlink.js", import.meta.url));

/**
 * The tree the race tests start from: a root with `d/file.txt` ("inside"), and a directory outside
 * it with `file.txt` and `only-outside.txt` (both `secret`), which `d` is swapped for.
 */
export function raceTree(prefix: string, secret: string): { root: string; outside: string } {
  const root = tempDir(`${prefix}-root-`);
  const outside = tempDir(`${prefix}-outside-`);
  mkdirSync(path.join(root, "d"));
  writeFileSync(path.join(root, "d", "file.txt"), "inside");
  writeFileSync(path.join(outside, "file.txt"), secret);
  writeFileSync(path.join(outside, "only-outside.txt"), secret);
  return { root, outside };
}

export interface Flipper {
  /** False once the hostile process has exited by itself (it reached its time cap). */
  readonly running: boolean;
  /** Stops it and resolves with the number of swaps it made. */
  stop(): Promise<number>;
}

/**
 * Starts a process swapping `dir` for a symlink to `outside` and back until stopped. Tests stop it
 * once they have sent enough requests, not after a fixed time: on a busy machine a fixed window
 * holds too few requests to mean anything.
 */
export function startFlipper(dir: string, outside: string, maxMs: number): Flipper {
  const stopFile = path.join(tempDir("flipper-"), "stop");
  const child = spawn(process.execPath, [FLIPPER, dir, outside, stopFile, String(maxMs)], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let output = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (output += d));
  let running = true;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  void exited.then(() => (running = false));
  return {
    get running() {
      return running;
    },
    async stop() {
      writeFileSync(stopFile, "");
      await exited;
      return Number(output.trim());
    },
  };
}

/** Every entry below `dir` (files with their contents, directories as `<dir>`), by relative path. */
export function snapshot(dir: string, prefix = ""): Map<string, string> {
  const found = new Map<string, string>();
  for (const name of readdirSync(dir).sort()) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) {
      found.set(prefix + name, "<dir>");
      for (const [k, v] of snapshot(full, `${prefix}${name}/`)) found.set(k, v);
    } else found.set(prefix + name, readFileSync(full, "utf8"));
  }
  return found;
}

/** The paths below `dir` created, changed or removed since `before` was taken. */
export function changedSince(before: Map<string, string>, dir: string): string[] {
  const after = snapshot(dir);
  return [...new Set([...before.keys(), ...after.keys()])].filter(
    (name) => before.get(name) !== after.get(name),
  );
}
