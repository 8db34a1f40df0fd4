import { problems } from "../http/problem.js";
import type { Logger } from "../log.js";
import { agentIdOf, requestEnvOf, type JsonRpcMessage } from "../protocol.js";
import { agentEnvironment } from "./env.js";
import { installState, notInstalled } from "./install.js";
import { installLogged } from "./install-progress.js";
import type { AgentRegistry } from "./registry.js";
import type { AgentDefinition } from "./types.js";

/** What a connection needs to start its agent: the definition, its environment and working directory. */
export interface Launch {
  agent: AgentDefinition;
  env: Record<string, string>;
  cwd?: string;
}

export interface LaunchOptions {
  registry: AgentRegistry;
  /** Agent used when `initialize` names none; unset, such an initialize is a 400. */
  defaultAgent: string | undefined;
  /** Install a missing agent on `initialize` instead of answering 409. */
  autoInstall: boolean;
  /** Working directory of agent processes. */
  workdir: string;
  logger: Logger;
}

/**
 * Resolves the agent an `initialize` request names (`_meta["sandboxagent.dev"].agent`, else the
 * default), installs it when allowed, and builds its environment: the server's base variables,
 * its `passEnv` and `env`, then the request's own `_meta["sandboxagent.dev"].env`. Throws the
 * problem (400, 409) that says what is wrong.
 */
export async function resolveLaunch(initialize: JsonRpcMessage, options: LaunchOptions): Promise<Launch> {
  const { registry } = options;
  const id = agentIdOf(initialize) ?? options.defaultAgent;
  if (id === undefined) {
    throw problems.badRequest(
      'initialize must name its agent in params._meta["sandboxagent.dev"].agent ' +
        "(or start the server with --default-agent ID).",
      { availableAgents: registry.ids() },
    );
  }
  const agent = registry.get(id);
  if (!agent)
    throw problems.badRequest(`Unknown agent ${JSON.stringify(id)}.`, { availableAgents: registry.ids() });
  const env = requestEnv(agent, initialize);
  await ensureInstalled(agent, options);
  return { agent, env: agentEnvironment(agent.spec, process.env, env), cwd: options.workdir };
}

/** Makes sure the agent can start: installs it when allowed, else throws the 409 that says how. */
async function ensureInstalled(agent: AgentDefinition, options: LaunchOptions): Promise<void> {
  if (installState(agent).installed) return;
  if (!options.autoInstall) throw notInstalled(agent.id);
  await installLogged(agent, options.logger);
}

/**
 * The request's own values for the variables the agent accepts from clients (`acceptedClientEnv`).
 * Any other name is refused, not dropped silently, with a detail saying how the server's owner
 * can allow it.
 */
function requestEnv(agent: AgentDefinition, initialize: JsonRpcMessage): Record<string, string> {
  const env = requestEnvOf(initialize);
  if (env === undefined) return {};
  if (env === "invalid")
    throw problems.badRequest('params._meta["sandboxagent.dev"].env must be an object of string values.');
  const allowed = acceptedClientEnv(agent);
  const refused = allowed.includes("*") ? [] : Object.keys(env).filter((name) => !allowed.includes(name));
  if (refused.length > 0) {
    throw problems.badRequest(
      `Agent ${JSON.stringify(agent.id)} does not accept the variables ${refused.join(", ")} from clients. ` +
        `The server's owner can allow them with --allow-client-env ${refused.join(",")} ` +
        `or the config file's "agents": {"${agent.id}": {"clientEnv": [...]}}.`,
      { allowedEnv: allowed },
    );
  }
  return env;
}

/** Names a client may set for the agent: those it takes from the server (`passEnv`) and `clientEnv`. */
export function acceptedClientEnv(agent: AgentDefinition): string[] {
  return [...new Set([...(agent.spec.passEnv ?? []), ...(agent.spec.clientEnv ?? [])])];
}
