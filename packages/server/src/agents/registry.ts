import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { catalogAgents } from "./catalog.js";
import type { AgentDefinition, AgentSpec } from "./types.js";

/** Set by the bundler: the bundle ships the mock agent as `mock-agent.mjs` beside its own files. */
declare const SANDBOX_AGENT_BUNDLED_MOCK: string | undefined;

/**
 * The mock agent's entry file when it is present: beside the bundle, else the
 * `@sandbox-agent/mock-agent` package (a development dependency, not installed with the server).
 */
function mockAgentEntry(): string | undefined {
  if (typeof SANDBOX_AGENT_BUNDLED_MOCK === "string") {
    const file = fileURLToPath(new URL(SANDBOX_AGENT_BUNDLED_MOCK, import.meta.url));
    return existsSync(file) ? file : undefined;
  }
  try {
    const entry = fileURLToPath(import.meta.resolve("@sandbox-agent/mock-agent"));
    return path.join(path.dirname(entry), "main.js");
  } catch {
    return undefined;
  }
}

function mockAgent(): AgentDefinition[] {
  const entry = mockAgentEntry();
  if (entry === undefined) return [];
  const spec: AgentSpec = {
    command: process.execPath,
    args: [entry],
    passEnv: ["MOCK_API_KEY", "MOCK_AGENT_STATE_DIR", "MOCK_REQUIRE_AUTH", "MOCK_AGENT_FLAGS"],
  };
  return [{ id: "mock", name: "Mock agent (deterministic test agent)", source: "builtin", spec }];
}

function builtinAgents(dataDir: string | undefined): AgentDefinition[] {
  return [...mockAgent(), ...(dataDir === undefined ? [] : catalogAgents(dataDir))];
}
/**
 * Agents known to this server: built-ins, overridden or extended by the config file. The
 * installable built-ins (claude, codex, …) are only known when a data directory holds their installs.
 */
export class AgentRegistry {
  private readonly agents = new Map<string, AgentDefinition>();

  constructor(configAgents: Record<string, AgentSpec> = {}, dataDir?: string) {
    for (const agent of builtinAgents(dataDir)) this.agents.set(agent.id, agent);
    for (const [id, spec] of Object.entries(configAgents)) {
      this.agents.set(id, { id, name: id, source: "config", spec });
    }
  }

  get(id: string): AgentDefinition | undefined {
    return this.agents.get(id);
  }

  list(): AgentDefinition[] {
    return [...this.agents.values()];
  }

  ids(): string[] {
    return [...this.agents.keys()];
  }
}
