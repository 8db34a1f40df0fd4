import { execFileSync } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { serverBin } from "@sandbox-agent/testkit";

/** Where the suite installs agents and keeps them between runs (CI caches this directory). */
export function e2eDataDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.resolve(
    env.SANDBOX_AGENT_E2E_DATA_DIR ?? path.join(os.homedir(), ".cache", "sandbox-agent-e2e"),
  );
}

export interface ListedAgent {
  id: string;
  installed: boolean;
  version: string | null;
  env: string[];
}

/** Asks the real CLI (`sandbox-agent agents --json`) what is installed in the data directory. */
export function listAgents(dataDir: string): ListedAgent[] {
  const out = execFileSync(process.execPath, [serverBin, "agents", "--json", "--data-dir", dataDir], {
    encoding: "utf8",
    timeout: 30_000,
  });
  return (JSON.parse(out) as { agents: ListedAgent[] }).agents;
}
