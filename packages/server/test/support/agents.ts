import { mockAgentBin, tempDir } from "@sandbox-agent/testkit";
import path from "node:path";

/** A config-file agent entry running the mock agent with extra flags. */
export function mockWith(...flags: string[]) {
  return { command: process.execPath, args: [mockAgentBin, ...flags] };
}

/** A unique `--stdin-log` file: records what the agent received, and marks its processes for `processesWith`. */
export function stdinLog(): string {
  return path.join(tempDir("mock-stdin-"), "stdin.log");
}
