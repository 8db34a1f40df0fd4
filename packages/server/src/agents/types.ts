/** How to start an agent process: the unit every agent definition resolves to. */
export interface AgentSpec {
  command: string;
  args?: string[];
  /** Variables set for the agent (on top of the minimal base environment). */
  env?: Record<string, string>;
  /** Names of server environment variables passed through to the agent when set (credentials, base URLs). */
  passEnv?: string[];
  cwd?: string;
}

export interface AgentDefinition {
  id: string;
  name: string;
  /** `builtin` ships with the server; `config` comes from `--config`. */
  source: "builtin" | "config";
  spec: AgentSpec;
}
