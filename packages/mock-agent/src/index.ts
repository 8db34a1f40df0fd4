/**
 * @sandbox-agent/mock-agent: a deterministic, scriptable ACP agent over stdio for tests,
 * benchmarks and demos. Run it with `mockAgentCommand()`; its prompt language is in the README.
 */
import { fileURLToPath } from "node:url";

export {
  parseScript,
  ScriptError,
  COMMAND_NAMES,
  STOP_REASONS,
  type ScriptCommand,
  type CommandName,
} from "./script.js";
export { parseFlags, type MockAgentFlags } from "./flags.js";
export { MOCK_AGENT_NAME, MOCK_AGENT_VERSION } from "./version.js";
export { AUTH_METHOD_ID } from "./handlers/lifecycle.js";
export { TINY_PNG_BASE64 } from "./handlers/content.js";
export type { StoredSession } from "./session.js";

/** Absolute path of the `sandbox-agent-mock` bin script. */
export const mockAgentBinPath: string = fileURLToPath(new URL("../../bin/mock-agent.js", import.meta.url));

/** How to spawn the mock agent: `spawn(command, [...args, ...flags])`. */
export function mockAgentCommand(flags: readonly string[] = []): { command: string; args: string[] } {
  return { command: process.execPath, args: [mockAgentBinPath, ...flags] };
}
