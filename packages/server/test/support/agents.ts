import { mockAgentBin, tempDir } from "@sandbox-agent/testkit";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { RpcMessage } from "./rpc.js";

/** A config-file agent entry running the mock agent with extra flags. */
export function mockWith(...flags: string[]) {
  return { command: process.execPath, args: [mockAgentBin, ...flags] };
}

/** A unique `--stdin-log` file: records what the agent received, and marks its processes for `processesWith`. */
export function stdinLog(): string {
  return path.join(tempDir("mock-stdin-"), "stdin.log");
}

/** What the agent behind `log` (its `--stdin-log`) received on stdin. */
export function received(log: string): RpcMessage[] {
  return readFileSync(log, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as RpcMessage);
}

/**
 * A real agent process that answers like the mock agent but not quite: the mock behind a filter
 * that passes every stdout line through `rewrite`, the source text of a `(line) => line` function.
 */
export function filteredMock(rewrite: string, ...flags: string[]): { command: string; args: string[] } {
  const file = path.join(tempDir("filtered-agent-"), "agent.mjs");
  writeFileSync(
    file,
    `import { spawn } from "node:child_process";
import readline from "node:readline";
const child = spawn(process.execPath, process.argv.slice(2), { stdio: ["pipe", "pipe", "inherit"] });
process.stdin.pipe(child.stdin);
const rewrite = ${rewrite};
readline.createInterface({ input: child.stdout }).on("line", (line) => process.stdout.write(rewrite(line) + "\\n"));
child.on("exit", (code) => process.exit(code ?? 1));
process.on("SIGTERM", () => child.kill("SIGTERM"));
`,
  );
  return { command: process.execPath, args: [file, mockAgentBin, ...flags] };
}
