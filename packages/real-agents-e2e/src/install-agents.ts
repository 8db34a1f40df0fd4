import { spawnSync } from "node:child_process";
import { serverBin } from "@sandbox-agent/testkit";
import { e2eDataDir } from "./data-dir.js";

/** The agents `npm run test:agents` installs and drives. */
export const E2E_AGENTS = ["claude", "codex", "pi", "gemini", "opencode"] as const;

/**
 * Installs the e2e agents with the real CLI (`sandbox-agent install-agent`) into the e2e data
 * directory; installs already in place are kept, so warm runs cost about a second.
 */
function main(): void {
  const dataDir = e2eDataDir();
  const agents = process.argv.length > 2 ? process.argv.slice(2) : [...E2E_AGENTS];
  for (const id of agents) {
    const started = Date.now();
    const result = spawnSync(process.execPath, [serverBin, "install-agent", id, "--data-dir", dataDir], {
      stdio: ["ignore", "inherit", "inherit"],
      timeout: 20 * 60_000,
    });
    if (result.status !== 0) {
      process.stderr.write(
        `install-agents: installing ${id} failed (exit ${result.status ?? result.signal})\n`,
      );
      process.exit(1);
    }
    process.stderr.write(`install-agents: ${id} ready in ${Date.now() - started} ms (${dataDir})\n`);
  }
}

main();
