import { fileURLToPath } from "node:url";
import path from "node:path";
import type { AgentDefinition, AgentSpec } from "./types.js";

function mockAgentSpec(): AgentSpec {
  const entry = fileURLToPath(import.meta.resolve("@sandbox-agent/mock-agent"));
  return {
    command: process.execPath,
    args: [path.join(path.dirname(entry), "main.js")],
    passEnv: ["MOCK_API_KEY"],
  };
}

function builtinAgents(): AgentDefinition[] {
  return [
    { id: "mock", name: "Mock agent (deterministic test agent)", source: "builtin", spec: mockAgentSpec() },
  ];
}

/** Agents known to this server: built-ins, overridden or extended by the config file. */
export class AgentRegistry {
  private readonly agents = new Map<string, AgentDefinition>();

  constructor(configAgents: Record<string, AgentSpec> = {}) {
    for (const agent of builtinAgents()) this.agents.set(agent.id, agent);
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
