import { isObject, META_KEY, METHODS } from "../protocol.js";

/** Returns `obj[key]` as an object, creating it (or replacing a non-object) first. */
export function objectAt(obj: Record<string, unknown>, key: string): Record<string, unknown> {
  const current = obj[key];
  if (isObject(current)) return current;
  const created: Record<string, unknown> = {};
  obj[key] = created;
  return created;
}

/**
 * Adds `result.agentCapabilities._meta["sandboxagent.dev"].extensions`. The server answers
 * `session/list` itself when the agent cannot, so `sessionCapabilities.list` is advertised too.
 */
export function advertiseExtensions(result: Record<string, unknown>): void {
  const capabilities = objectAt(result, "agentCapabilities");
  const sandbox = objectAt(objectAt(capabilities, "_meta"), META_KEY);
  sandbox.extensions = {
    sessionDetach: true,
    sessionTerminate: true,
    sessionEndedNotification: true,
    sessionListModels: true,
    sessionSetMetadata: true,
    sessionAgentMeta: true,
    sessionListMetadata: true,
    agentUnparsedNotification: true,
    methods: Object.values(METHODS),
  };
  const sessions = objectAt(capabilities, "sessionCapabilities");
  if (!isObject(sessions.list)) sessions.list = {};
}
