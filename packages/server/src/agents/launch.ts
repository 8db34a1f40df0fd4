import { problems } from "../http/problem.js";
import { isObject, type JsonRpcMessage } from "../runtime/json-rpc.js";
import { installState, notInstalled } from "./install.js";
import { installLogged } from "./install-progress.js";
import type { AgentDefinition } from "./types.js";
import type { Logger } from "../log.js";

export interface PrepareOptions {
  /** Install a missing agent on `initialize` instead of answering 409. */
  autoInstall: boolean;
  logger: Logger;
}

/**
 * Makes sure the agent can start: installs it when allowed, else throws the 409 that says how.
 * Returns the variables the request itself supplies for the agent.
 */
export async function prepareAgent(
  agent: AgentDefinition,
  initialize: JsonRpcMessage,
  options: PrepareOptions,
): Promise<Record<string, string>> {
  const env = requestEnv(agent, initialize);
  if (!installState(agent).installed) {
    if (!options.autoInstall) throw notInstalled(agent.id);
    await installLogged(agent, options.logger);
  }
  return env;
}

/**
 * `params._meta["sandboxagent.dev"].env`: per-request values (credentials, base URLs) for the
 * variables the agent accepts from clients (`acceptedClientEnv`). Any other name is refused, not
 * dropped silently, with a detail saying how the server's owner can allow it.
 */
export function requestEnv(agent: AgentDefinition, initialize: JsonRpcMessage): Record<string, string> {
  const params = initialize.params;
  const ours = isObject(params) && isObject(params._meta) ? params._meta["sandboxagent.dev"] : undefined;
  const env = isObject(ours) ? ours.env : undefined;
  if (env === undefined) return {};
  if (!isObject(env) || Object.values(env).some((v) => typeof v !== "string")) {
    throw problems.badRequest('params._meta["sandboxagent.dev"].env must be an object of string values.');
  }
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
  return env as Record<string, string>;
}

/** Names a client may set for the agent: those it takes from the server (`passEnv`) and `clientEnv`. */
export function acceptedClientEnv(agent: AgentDefinition): string[] {
  return [...new Set([...(agent.spec.passEnv ?? []), ...(agent.spec.clientEnv ?? [])])];
}
