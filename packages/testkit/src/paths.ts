import { fileURLToPath } from "node:url";
import path from "node:path";

/** Repository root, found from this file's location in `packages/testkit/dist/src`. */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");
export const serverBin = path.join(repoRoot, "packages/server/bin/sandbox-agent.js");
/** The compiled server, module by module (the bin may run the bundle instead): for tests that watch which modules load. */
export const compiledServerBin = path.join(repoRoot, "packages/server/dist/src/cli.js");
export const mockAgentBin = path.join(repoRoot, "packages/mock-agent/bin/mock-agent.js");
