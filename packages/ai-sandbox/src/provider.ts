import type { SandboxInstance } from "./types.js";

/** What `defineSandbox` asks a provider for. */
export interface ProviderCreateRequest {
  /** The sandbox definition id. */
  id: string;
  /** Declared workspace env + secret values; becomes `SandboxInstance.env`. */
  env: Readonly<Record<string, string>>;
}

/** A provider's raw instance, before the workspace bootstrap adds `workspace`. */
export interface ProviderInstance extends Omit<SandboxInstance, "workspace"> {
  /** Absolute directory inside the sandbox for bootstrap state (git skill clones), outside the workdir. */
  readonly stateDir: string;
  /**
   * `false` when `spawn` always rejects: workspace git sources are then cloned on the host and
   * uploaded. Otherwise (the default) they are cloned with `spawn`, inside the sandbox.
   */
  readonly canSpawn?: boolean;
  /**
   * `true` when the sandbox is a view of this machine whose commands cannot see most of its files
   * (bubblewrap): a git source or git skill given as a path or `file://` URL names a repository of
   * this machine, so it is cloned here and imported. URLs are still cloned inside the sandbox.
   */
  readonly localPathsOnHost?: boolean;
  /** Copy a directory of the host machine to `dest` (absolute, inside the sandbox). */
  importDirectory(hostDir: string, dest: string): Promise<void>;
  /**
   * The workspace is already in place (a resumed or restored sandbox): bootstrap only lists what
   * it provides (skills, MCP servers) and does not import, write or run anything.
   */
  readonly bootstrapped?: boolean;
  /** Called once the workspace bootstrap has completed, so a later resume can tell a finished one. */
  markBootstrapped?(): Promise<void>;
  /** Best-effort synchronous cleanup for `process.on('exit')`. */
  disposeSync?(): void;
  /** The provider's own id of the sandbox (container id, pod name, directory), recorded by a fleet. */
  readonly providerId?: string;
  /** Base URL of the sandbox's server as the app reaches it, when it has one (never with credentials). */
  readonly endpoint?: string;
}

export interface SandboxProvider {
  readonly name: string;
  create(request: ProviderCreateRequest): Promise<ProviderInstance>;
}

/**
 * A provider whose sandboxes are named by key (`ProviderCreateRequest.id`) and outlive the process that
 * created them: what a fleet (`createFleet`) needs to create, reattach, stop and reap sandboxes from
 * any replica. Every method may be called from a process other than the one that created the sandbox.
 * The fleet's leases make sure no two replicas call these for the same key at once.
 */
export interface PersistentSandboxProvider extends SandboxProvider {
  /**
   * A new sandbox for `request.id`. Must fail (not adopt) when one exists already: that would mean two
   * replicas created the same sandbox.
   */
  create(request: ProviderCreateRequest): Promise<ProviderInstance>;
  /**
   * Reattaches to the sandbox of `request.id`, starting it first when it is stopped, with its workspace
   * as it was (no bootstrap runs again); `undefined` when no such sandbox exists. `request.env` brings
   * the declared env and secrets back (they are never persisted).
   */
  resume(request: ProviderCreateRequest): Promise<ProviderInstance | undefined>;
  /** Stops the sandbox's processes, keeping its state for `resume`; no error when nothing runs. */
  stop(id: string): Promise<void>;
  /** Removes the sandbox and its state; no error when it does not exist. */
  destroy(id: string): Promise<void>;
}
