/**
 * Test fixture: a real stdio pass-through between the adapter and an agent
 * process that rewrites the `agentCapabilities` of the initialize answer, so
 * tests can run the real mock agent as an agent without images, session/load
 * or MCP-over-HTTP. Usage: capability-proxy <json overrides> <command> [args…]
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

const [overridesJson, command, ...args] = process.argv.slice(2);
if (!overridesJson || !command) {
  process.stderr.write("usage: capability-proxy <json> <command> [args...]\n");
  process.exit(2);
}
const overrides = JSON.parse(overridesJson) as Record<string, unknown>;
const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
process.stdin.pipe(child.stdin);
createInterface({ input: child.stdout }).on("line", (line) => {
  process.stdout.write(`${rewrite(line)}\n`);
});
child.on("exit", (code) => process.exit(code ?? 1));
process.on("SIGTERM", () => child.kill("SIGTERM"));

function rewrite(line: string): string {
  try {
    const message = JSON.parse(line) as { result?: { agentCapabilities?: Record<string, unknown> } };
    const caps = message.result?.agentCapabilities;
    if (!caps) return line;
    message.result!.agentCapabilities = merge(caps, overrides);
    return JSON.stringify(message);
  } catch {
    return line;
  }
}

function merge(base: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(patch)) {
    const current = out[key];
    out[key] =
      value && typeof value === "object" && !Array.isArray(value) && current && typeof current === "object"
        ? merge(current as Record<string, unknown>, value as Record<string, unknown>)
        : value;
  }
  return out;
}
