import type { Logger } from "../log.js";
import type { ConnectionExtension } from "../runtime/extension.js";

export interface ExtensionDeps {
  logger: Logger;
}

/** The Sandbox extensions (`_sandboxagent/*`, `_meta["sandboxagent.dev"]`) attached to every connection. */
export function sandboxExtensions(_deps: ExtensionDeps): ConnectionExtension[] {
  return [];
}
