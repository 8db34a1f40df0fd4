import { defineChatMiddleware, type DefinedChatMiddleware } from "@tanstack/ai";
import { onProcessExit } from "./exit-hook.js";
import type { ProviderInstance, SandboxProvider } from "./provider.js";
import {
  SandboxCapability,
  provideSandbox,
  type ProvisionedWorkspace,
  type SandboxInstance,
} from "./types.js";
import { bootstrapWorkspace, workspaceEnv, type Workspace } from "./workspace.js";

export interface SandboxOptions {
  id: string;
  provider: SandboxProvider;
  workspace?: Workspace;
}

/**
 * A sandbox definition. The instance is created lazily on first `start()` (workspace source,
 * skills, instructions and setup run then, once) and shared by every later `start()` until
 * `dispose()`; it is also disposed when the host process exits.
 */
export interface SandboxDefinition {
  readonly id: string;
  readonly provider: SandboxProvider;
  readonly workspace: Workspace | undefined;
  start(): Promise<SandboxInstance>;
  dispose(): Promise<void>;
}

export function defineSandbox(options: SandboxOptions): SandboxDefinition {
  if (!/^[A-Za-z0-9._-]+$/.test(options.id)) throw new TypeError(`defineSandbox: invalid id "${options.id}"`);
  let current: Promise<SandboxInstance> | undefined;
  const start = (): Promise<SandboxInstance> => {
    if (current !== undefined) return current;
    // Disposing the instance (directly or via the definition) or a failed start forgets it.
    const forget = (): void => {
      if (current === starting) current = undefined;
    };
    const starting: Promise<SandboxInstance> = startInstance(options, forget);
    starting.catch(forget);
    current = starting;
    return starting;
  };
  const dispose = async (): Promise<void> => {
    const instance = await current?.catch(() => undefined);
    await instance?.dispose();
  };
  return { id: options.id, provider: options.provider, workspace: options.workspace, start, dispose };
}

async function startInstance(options: SandboxOptions, forget: () => void): Promise<SandboxInstance> {
  const raw = await options.provider.create({ id: options.id, env: workspaceEnv(options.workspace) });
  const unregister = onProcessExit(() => raw.disposeSync?.());
  let released: Promise<void> | undefined;
  const release = (): Promise<void> => {
    forget();
    unregister();
    released ??= raw.dispose();
    return released;
  };
  try {
    const instance = await bootstrapWorkspace(raw, options.workspace, (provisioned) =>
      withWorkspace(raw, provisioned, release),
    );
    if (raw.bootstrapped !== true) await raw.markBootstrapped?.();
    return instance;
  } catch (error) {
    await release();
    throw new Error(`sandbox "${options.id}" bootstrap failed: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

function withWorkspace(
  raw: ProviderInstance,
  workspace: ProvisionedWorkspace,
  dispose: () => Promise<void>,
): SandboxInstance {
  return {
    id: raw.id,
    provider: raw.provider,
    workdir: raw.workdir,
    env: raw.env,
    files: raw.files,
    ...(raw.channel !== undefined ? { channel: raw.channel } : {}),
    workspace,
    spawn: (command, opts) => raw.spawn(command, opts),
    ...(raw.openAcp !== undefined ? { openAcp: raw.openAcp.bind(raw) } : {}),
    dispose,
  };
}

export type SandboxMiddleware = DefinedChatMiddleware<
  unknown,
  readonly [],
  readonly [typeof SandboxCapability]
>;

/** Chat middleware providing `SandboxCapability` with the (started or reused) instance of `sandbox`. */
export function withSandbox(sandbox: SandboxDefinition): SandboxMiddleware {
  return defineChatMiddleware({
    name: `sandbox:${sandbox.id}`,
    provides: [SandboxCapability],
    async setup(ctx) {
      provideSandbox(ctx, await sandbox.start());
    },
  });
}
