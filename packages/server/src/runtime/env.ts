import type { AgentSpec } from "../agents/types.js";

/**
 * Variables every agent gets from the server's environment: enough to find programs, a home
 * directory and the locale. Everything else (API keys, tokens) must be named by the agent's
 * `passEnv` or set in its `env`, so host secrets never reach an agent by accident.
 */
const BASE_NAMES = ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR", "LANG", "LANGUAGE"];

export function agentEnvironment(
  spec: AgentSpec,
  host: NodeJS.ProcessEnv,
  extra: Record<string, string> = {},
): Record<string, string> {
  const env: Record<string, string> = {};
  const pass = (name: string) => {
    const value = host[name];
    if (value !== undefined) env[name] = value;
  };
  BASE_NAMES.forEach(pass);
  Object.keys(host)
    .filter((name) => name.startsWith("LC_"))
    .forEach(pass);
  (spec.passEnv ?? []).forEach(pass);
  return { ...env, ...spec.env, ...extra };
}
