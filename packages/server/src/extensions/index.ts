import { FsRoot } from "../control-plane/fs-root.js";
import type { Logger } from "../log.js";
import type { ProcessManager } from "../processes/manager.js";
import type { ConnectionExtension } from "../runtime/extension.js";
import { ClientCapabilitiesExtension } from "./client-capabilities.js";
import { SandboxExtension } from "./sandbox-extension.js";
import type { SavedConnectionState, SessionRecord } from "./state.js";
import type { StateTable } from "../store/event-store.js";

export interface ExtensionDeps {
  logger: Logger;
  /** Runs ACP terminals for connections that let the server serve them. */
  processes: ProcessManager;
  /** Root of the filesystem API, which confines ACP `fs/*` served by the server. */
  fsRoot: string;
  /** Default working directory of ACP terminals. */
  workdir: string;
  /** Where session records (metadata, counts) are kept: on disk with a data directory. */
  sessions?: StateTable<SessionRecord>;
  /** Where each connection's muted sessions and agent-reported model/mode are kept until it closes. */
  connections?: StateTable<SavedConnectionState>;
}

/** The Sandbox extensions (`_sandboxagent/*`, `_meta["sandboxagent.dev"]`) attached to every connection. */
export function sandboxExtensions(deps: ExtensionDeps): ConnectionExtension[] {
  const fsRoot = { configured: deps.fsRoot, root: new FsRoot(deps.fsRoot) };
  return [
    new SandboxExtension(deps.logger, { sessions: deps.sessions, connections: deps.connections }),
    new ClientCapabilitiesExtension(
      { processes: deps.processes, fsRoot, workdir: deps.workdir },
      deps.logger,
    ),
  ];
}
