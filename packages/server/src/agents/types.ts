/** How to start an agent process: the unit every agent definition resolves to. */
export interface AgentSpec {
  command: string;
  args?: string[];
  /** Variables set for the agent (on top of the minimal base environment). */
  env?: Record<string, string>;
  /** Names of server environment variables passed through to the agent when set (credentials, base URLs). */
  passEnv?: string[];
  /**
   * Names of variables a client may set for this agent in `initialize`
   * (`params._meta["sandboxagent.dev"].env`), besides those in `passEnv`; `"*"` allows any name.
   */
  clientEnv?: string[];
  cwd?: string;
}

/**
 * An agent entry of the config file: with `command`, an agent of its own (replacing a built-in of
 * the same id); without, an adjustment of the built-in of that id (`env` and `passEnv` added to
 * its own, `clientEnv` and `cwd` set).
 */
export type AgentConfigEntry = Omit<AgentSpec, "command"> & { command?: string };

export interface AgentDefinition {
  id: string;
  name: string;
  /** `builtin` ships with the server; `config` comes from `--config`. */
  source: "builtin" | "config";
  spec: AgentSpec;
  /** Present for built-in agents that are installed from npm on demand. */
  install?: AgentInstallSpec;
  /** Short notes on the agent's quirks, shown by `GET /v2/agents`. */
  notes?: string;
}

/** One npm package an installable agent needs, at the version installed by default. */
export interface AgentPackage {
  name: string;
  version: string;
}

/** How a built-in agent is installed from npm into `<dataDir>/agents/<id>/`. */
export interface AgentInstallSpec {
  /** The install directory (its own package.json and node_modules). */
  dir: string;
  /** The first package is the agent itself: its version is the one reported and overridable. */
  packages: AgentPackage[];
}
