import { fileURLToPath } from "node:url";
import path from "node:path";
import { catalogAgents } from "./catalog.js";
import type { AgentDefinition, AgentSpec } from "./types.js";

function mockAgentSpec(): AgentSpec {
  const entry = fileURLToPath(import.meta.resolve("@sandbox-agent/mock-agent"));
  return {
    command: process.execPath,
    args: [path.join(path.dirname(entry), "main.js")],
    passEnv: ["MOCK_API_KEY", "MOCK_AGENT_STATE_DIR", "MOCK_REQUIRE_AUTH", "MOCK_AGENT_FLAGS"],
  };
}

function builtinAgents(dataDir: string | undefined): AgentDefinition[] {
  return [
    { id: "mock", name: "Mock agent (deterministic test agent)", source: "builtin", spec: mockAgentSpec() },
    ...(dataDir === undefined ? [] : catalogAgents(dataDir)),
  ];
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
