import type { AgentSpec } from "./types.js";

/**
 * Variables every agent (and every process started through the process API) gets from the
 * server's environment: enough to find programs, a home directory and the locale. Everything else
 * (API keys, tokens) must be named by the agent's `passEnv` or set in its `env`, so host secrets
 * never reach a child process by accident.
 */
const BASE_NAMES = ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR", "LANG", "LANGUAGE"];

/** The base variables (and `LC_*`) of `host`, plus `names` when set. */
export function baseEnvironment(
  host: NodeJS.ProcessEnv,
  names: readonly string[] = [],
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
  names.forEach(pass);
  return env;
}

export function agentEnvironment(
  spec: AgentSpec,
  host: NodeJS.ProcessEnv,
  extra: Record<string, string> = {},
): Record<string, string> {
  return { ...baseEnvironment(host, spec.passEnv), ...spec.env, ...extra };
}
