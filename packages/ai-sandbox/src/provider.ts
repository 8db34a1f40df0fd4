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
}

export interface SandboxProvider {
  readonly name: string;
  create(request: ProviderCreateRequest): Promise<ProviderInstance>;
}
