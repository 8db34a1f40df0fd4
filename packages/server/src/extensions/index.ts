import { FsRoot } from "../control-plane/fs-root.js";
import type { Logger } from "../log.js";
import type { ProcessManager } from "../processes/manager.js";
import type { ConnectionExtension } from "../runtime/extension.js";
import { ClientCapabilitiesExtension } from "./client-capabilities.js";
import { SandboxExtension } from "./sandbox-extension.js";

export interface ExtensionDeps {
  logger: Logger;
  /** Runs ACP terminals for connections that let the server serve them. */
  processes: ProcessManager;
  /** Root of the filesystem API, which confines ACP `fs/*` served by the server. */
  fsRoot: string;
  /** Default working directory of ACP terminals. */
  workdir: string;
}

/** The Sandbox extensions (`_sandboxagent/*`, `_meta["sandboxagent.dev"]`) attached to every connection. */
export function sandboxExtensions(deps: ExtensionDeps): ConnectionExtension[] {
  const fsRoot = { configured: deps.fsRoot, root: new FsRoot(deps.fsRoot) };
  return [
    new SandboxExtension(deps.logger),
    new ClientCapabilitiesExtension(
      { processes: deps.processes, fsRoot, workdir: deps.workdir },
      deps.logger,
    ),
  ];
}
