import { spawnSync } from "node:child_process";

/**
 * Why bubblewrap cannot sandbox a command on this machine (for `needService("bwrap", …)`), or
 * undefined when it can: `bwrap` on PATH and unprivileged user and PID namespaces available.
 */
export function bwrapUnavailable(): string | undefined {
  const run = spawnSync("bwrap", ["--unshare-user", "--unshare-pid", "--ro-bind", "/", "/", "true"], {
    encoding: "utf8",
    timeout: 10_000,
  });
  if (run.error !== undefined) return `cannot run bwrap (apt-get install bubblewrap): ${run.error.message}`;
  if (run.status !== 0) return `bwrap cannot create namespaces here: ${run.stderr.trim()}`;
  return undefined;
}
