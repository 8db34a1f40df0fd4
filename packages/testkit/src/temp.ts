import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";

export function tempDir(prefix = "sandbox-agent-test-"): string {
  return mkdtempSync(path.join(os.tmpdir(), prefix));
}
