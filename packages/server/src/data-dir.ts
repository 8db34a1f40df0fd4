import os from "node:os";
import path from "node:path";

/** `$SANDBOX_AGENT_DATA_DIR`, else `$XDG_DATA_HOME/sandbox-agent`, else `~/.local/share/sandbox-agent`. */
export function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SANDBOX_AGENT_DATA_DIR) return path.resolve(env.SANDBOX_AGENT_DATA_DIR);
  const base = env.XDG_DATA_HOME || path.join(os.homedir(), ".local", "share");
  return path.join(base, "sandbox-agent");
}
