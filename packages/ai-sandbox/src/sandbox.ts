import { defineChatMiddleware, type DefinedChatMiddleware } from "@tanstack/ai";
import { onProcessExit } from "./exit-hook.js";
import type { Fleet } from "./fleet.js";
import type { ProviderInstance, SandboxProvider } from "./provider.js";
import {
  SandboxCapability,
  provideSandbox,
  type ProvisionedWorkspace,
  type SandboxInstance,
} from "./types.js";
import { bootstrapWorkspace, workspaceEnv, type Workspace } from "./workspace.js";

interface CommonOptions {
  id: string;
  workspace?: Workspace;
}

export type SandboxOptions = CommonOptions &
  (
    | { provider: SandboxProvider; fleet?: undefined }
    | {
        /**
         * The sandbox is the fleet's sandbox of key `id`, found again by every replica of the
         * application that shares the fleet's store (its provider is the fleet's).
         */
        fleet: Fleet;
        provider?: undefined;
      }
  );

/**
 * A sandbox definition. The instance is created lazily on first `start()` (workspace source,
 * skills, instructions and setup run then, once) and shared by every later `start()` until
 * `dispose()`; it is also disposed when the host process exits.
 */
export interface SandboxDefinition {
  readonly id: string;
  readonly provider: SandboxProvider;
  readonly workspace: Workspace | undefined;
  /** The fleet the sandbox belongs to, if any (`withSandbox` then records activity with it). */
  readonly fleet: Fleet | undefined;
  start(): Promise<SandboxInstance>;
  dispose(): Promise<void>;
}

/**
 * With a fleet, `start()` is the fleet's `getOrCreate(id)`: the sandbox is created (and its workspace
 * bootstrapped) by one replica and reattached by the others, with its workspace as it was. The
 * instance is reused while the fleet's record says the same sandbox runs; `dispose()` releases this
 * process's handle and leaves the sandbox to the fleet (its idle reaper, `stop`, `destroy`).
 */
export function defineSandbox(options: SandboxOptions): SandboxDefinition {
  if (!/^[A-Za-z0-9._-]+$/.test(options.id)) throw new TypeError(`defineSandbox: invalid id "${options.id}"`);
  const { fleet } = options;
  const provider = fleet ? fleet.provider : options.provider;
  if (provider === undefined) throw new TypeError("defineSandbox: give a provider or a fleet");
  let current: Promise<SandboxInstance> | undefined;
  let currentProviderId: string | undefined;
  const start = async (): Promise<SandboxInstance> => {
    // Another replica may have stopped (reaped) or replaced the fleet's sandbox since: look again.
    const cached = current;
    if (fleet && cached !== undefined && !(await stillRunning(fleet, options.id, currentProviderId))) {
      if (current === cached) current = undefined;
      void cached.then((instance) => instance.dispose()).catch(() => undefined);
    }
    if (current !== undefined) return current;
    // Disposing the instance (directly or via the definition) or a failed start forgets it.
    const forget = (): void => {
      if (current === starting) current = undefined;
    };
    const opening = open(options, provider);
    const starting: Promise<SandboxInstance> = opening.then((raw) => {
      currentProviderId = raw.providerId;
      return startInstance(options, raw, forget);
    });
    starting.catch(forget);
    current = starting;
    return starting;
  };
  const dispose = async (): Promise<void> => {
    const instance = await current?.catch(() => undefined);
    await instance?.dispose();
  };
  return { id: options.id, provider, workspace: options.workspace, fleet, start, dispose };
}

/** A new instance from the provider, or the fleet's sandbox (marked bootstrapped unless it needs to be). */
async function open(options: SandboxOptions, provider: SandboxProvider): Promise<ProviderInstance> {
  const request = { id: options.id, env: workspaceEnv(options.workspace) };
  if (!options.fleet) return provider.create(request);
  const { instance, outcome } = await options.fleet.getOrCreate(options.id, { env: request.env });
  // Resumed: the workspace is in place, unless the provider can tell its first bootstrap never finished.
  if (outcome === "created" || instance.bootstrapped === false) return instance;
  return { ...instance, bootstrapped: true };
}

async function stillRunning(fleet: Fleet, key: string, providerId: string | undefined): Promise<boolean> {
  const record = await fleet.store.sandboxes.get(key);
  return record?.status === "running" && (record.providerId ?? undefined) === providerId;
}

async function startInstance(
  options: SandboxOptions,
  raw: ProviderInstance,
  forget: () => void,
): Promise<SandboxInstance> {
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
    // A fleet's sandbox with a half-made workspace would be resumed as if it were complete.
    if (options.fleet && raw.bootstrapped !== true)
      await options.fleet.destroy(options.id).catch(() => false);
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

/**
 * Chat middleware providing `SandboxCapability` with the (started or reused) instance of `sandbox`.
 * For a fleet's sandbox it also records activity when each turn starts and ends, so the idle reaper
 * counts from the end of the last turn.
 */
export function withSandbox(sandbox: SandboxDefinition): SandboxMiddleware {
  const touch = async (): Promise<void> => {
    await sandbox.fleet?.touch(sandbox.id).catch((error: Error) => process.emitWarning(error));
  };
  return defineChatMiddleware({
    name: `sandbox:${sandbox.id}`,
    provides: [SandboxCapability],
    async setup(ctx) {
      provideSandbox(ctx, await sandbox.start());
    },
    onStart: touch,
    onFinish: touch,
    onAbort: touch,
    onError: touch,
  });
}
