import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { ConfigError } from "../config-error.js";
import { catalogAgents } from "./catalog.js";
import type { AgentConfigEntry, AgentDefinition, AgentSpec } from "./types.js";

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
export interface RegistryOptions {
  /** Variable names every agent accepts from clients (`--allow-client-env`); `"*"`: any. */
  clientEnv?: readonly string[];
}

/**
 * Agents known to this server: built-ins, overridden or extended by the config file. The
 * installable built-ins (claude, codex, …) are only known when a data directory holds their installs.
 */
export class AgentRegistry {
  private readonly agents = new Map<string, AgentDefinition>();

  /** Throws a `ConfigError` for a config entry without `command` that names no built-in agent. */
  constructor(
    configAgents: Record<string, AgentConfigEntry> = {},
    dataDir?: string,
    options: RegistryOptions = {},
  ) {
    for (const agent of builtinAgents(dataDir)) this.agents.set(agent.id, agent);
    for (const [id, entry] of Object.entries(configAgents)) {
      this.agents.set(id, configured(id, entry, this.agents.get(id)));
    }
    if (options.clientEnv?.length) {
      for (const agent of this.agents.values()) {
        const names = new Set([...(agent.spec.clientEnv ?? []), ...options.clientEnv]);
        agent.spec = { ...agent.spec, clientEnv: [...names] };
      }
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

/** A config entry: an agent of its own when it has a `command`, else an adjusted built-in. */
function configured(
  id: string,
  entry: AgentConfigEntry,
  builtin: AgentDefinition | undefined,
): AgentDefinition {
  const { command } = entry;
  if (command !== undefined) return { id, name: id, source: "config", spec: { ...entry, command } };
  if (builtin === undefined)
    throw new ConfigError(
      `Config agent "${id}" has no "command" and there is no built-in agent "${id}" to adjust: add a command.`,
    );
  const spec: AgentSpec = {
    ...builtin.spec,
    env: { ...builtin.spec.env, ...entry.env },
    passEnv: [...new Set([...(builtin.spec.passEnv ?? []), ...(entry.passEnv ?? [])])],
    ...(entry.clientEnv !== undefined ? { clientEnv: entry.clientEnv } : {}),
    ...(entry.cwd !== undefined ? { cwd: entry.cwd } : {}),
  };
  return { ...builtin, spec };
}
