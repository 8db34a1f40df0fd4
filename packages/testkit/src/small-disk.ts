import { spawnSync } from "node:child_process";
import { tempDir } from "./temp.js";

/**
 * Why a small tmpfs in a private mount namespace cannot be had here (for
 * `needService("mount namespaces", …)`), or undefined when it can: root, and `unshare --mount`.
 */
export function mountNamespaceMissing(): string | undefined {
  if (process.getuid?.() !== 0) return "needs root (a small tmpfs mounted in a private mount namespace)";
  const probe = spawnSync(
    "unshare",
    ["--mount", "--propagation", "private", "sh", "-c", 'mount -t tmpfs tmpfs "$1"', "sh", tempDir()],
    { encoding: "utf8" },
  );
  if (probe.status === 0) return undefined;
  return `unshare --mount … mount -t tmpfs failed: ${probe.error?.message ?? probe.stderr}`;
}

/**
 * A `startServer` wrapper that runs the server with a tmpfs of `size` (e.g. `1m`) mounted on `dir`
 * in its own mount namespace: only the server sees it; a test reaches it through
 * `/proc/<pid>/root/<dir>`. `dir` must exist.
 */
export function smallDiskWrapper(dir: string, size: string): string[] {
  const script = `mount -t tmpfs -o size=${size} tmpfs "$1" && shift && exec "$@"`;
  return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", dir];
}
