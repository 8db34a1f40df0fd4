import { problems } from "../http/problem.js";
import { isObject, type JsonRpcMessage } from "../runtime/json-rpc.js";
import { installAgent, installState, notInstalled } from "./install.js";
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
    options.logger.info("installing agent before initialize", { agent: agent.id });
    const result = await installAgent(agent, {
      onProgress: (line) => options.logger.debug("npm", { agent: agent.id, line }),
    });
    options.logger.info("agent installed", {
      agent: agent.id,
      version: result.version,
      ms: result.durationMs,
    });
  }
  return env;
}

/**
 * `params._meta["sandboxagent.dev"].env`: per-request values (credentials, base URLs) for the
 * variables the agent's entry names in `passEnv`. Any other name is refused, not dropped silently.
 */
export function requestEnv(agent: AgentDefinition, initialize: JsonRpcMessage): Record<string, string> {
  const params = initialize.params;
  const ours = isObject(params) && isObject(params._meta) ? params._meta["sandboxagent.dev"] : undefined;
  const env = isObject(ours) ? ours.env : undefined;
  if (env === undefined) return {};
  if (!isObject(env) || Object.values(env).some((v) => typeof v !== "string")) {
    throw problems.badRequest('params._meta["sandboxagent.dev"].env must be an object of string values.');
  }
  const allowed = new Set(agent.spec.passEnv ?? []);
  const refused = Object.keys(env).filter((name) => !allowed.has(name));
  if (refused.length > 0) {
    throw problems.badRequest(
      `Agent ${JSON.stringify(agent.id)} does not accept the variables ${refused.join(", ")}.`,
      {
        allowedEnv: [...allowed],
      },
    );
  }
  return env as Record<string, string>;
}
