import { fileURLToPath } from "node:url";
import path from "node:path";

/** Repository root, found from this file's location in `packages/testkit/dist/src`. */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");
export const serverBin = path.join(repoRoot, "packages/server/bin/sandbox-agent.js");
export const mockAgentBin = path.join(repoRoot, "packages/mock-agent/bin/mock-agent.js");
