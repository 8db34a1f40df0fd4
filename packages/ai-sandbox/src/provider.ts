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
  /** Copy a directory of the host machine to `dest` (absolute, inside the sandbox). */
  importDirectory(hostDir: string, dest: string): Promise<void>;
  /** Best-effort synchronous cleanup for `process.on('exit')`. */
  disposeSync?(): void;
}

export interface SandboxProvider {
  readonly name: string;
  create(request: ProviderCreateRequest): Promise<ProviderInstance>;
}
