import type { Logger } from "../log.js";
import type { ConnectionExtension } from "../runtime/extension.js";
import { SandboxExtension } from "./sandbox-extension.js";

export interface ExtensionDeps {
  logger: Logger;
}

/** The Sandbox extensions (`_sandboxagent/*`, `_meta["sandboxagent.dev"]`) attached to every connection. */
export function sandboxExtensions(deps: ExtensionDeps): ConnectionExtension[] {
  return [new SandboxExtension(deps.logger)];
}
