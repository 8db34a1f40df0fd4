import { rmSync } from "node:fs";
import { cp, mkdir, mkdtemp, realpath } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { bwrapLauncher, type BwrapOptions } from "./bwrap.js";
import { sameNetwork } from "./channel.js";
import { LocalFiles } from "./local-files.js";
import { killGroupSync, spawnGroup } from "./process.js";
import { persistentLocal, type OpenLocal } from "./local-persistent.js";
import type {
  PersistentSandboxProvider,
  ProviderCreateRequest,
  ProviderInstance,
  SandboxProvider,
} from "./provider.js";
import type { SandboxProcess, SpawnOptions } from "./types.js";

export interface LocalProcessSandboxOptions extends BwrapOptions {
  /** Sandbox directory (created if missing, kept on dispose). Default: a fresh temp dir, removed on dispose. */
  root?: string;
  /**
   * Persistent sandboxes, for a fleet: the sandbox of id X is `<parentDir>/X`, kept on dispose, and
   * `resume`/`stop`/`destroy` find it by id from any process on this machine. Excludes `root`.
   */
  parentDir?: string;
  /** `HOME` for sandbox processes: a path, `"host"` for the host's HOME (CLI logins), default `<root>/home`. */
  home?: string;
  /** Host variables to pass through in addition to the minimal base (e.g. `["SSH_AUTH_SOCK"]`). */
  inheritEnv?: string[];
  /**
   * `"bwrap"`: run every command (agent, setup) under bubblewrap; the workspace and the sandbox's
   * home, tmp and state directories writable at their host paths, system directories read-only,
   * everything else of the host absent; own user, PID, IPC namespaces. `network`, `readOnly` and
   * `readWrite` tune it. Default `"none"`: plain host processes (no isolation, no overhead).
   */
  isolate?: "none" | "bwrap";
}

const BWRAP_ONLY = ["network", "readOnly", "readWrite"] as const;

const BASE_VARS = ["PATH", "LANG", "TERM"];

/** The minimal host environment every sandbox process gets; everything else must be declared. */
function baseEnv(home: string, tmp: string, inherit: readonly string[] = []): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined) continue;
    if (BASE_VARS.includes(name) || name.startsWith("LC_") || inherit.includes(name)) env[name] = value;
  }
  env["HOME"] = home;
  env["TMPDIR"] = tmp;
  return env;
}

/** Embedded default provider: a directory on this machine; processes run in their own process groups. */
export function localProcessSandbox(
  options: LocalProcessSandboxOptions & { parentDir: string },
): PersistentSandboxProvider;
export function localProcessSandbox(options?: LocalProcessSandboxOptions): SandboxProvider;
export function localProcessSandbox(options: LocalProcessSandboxOptions = {}): SandboxProvider {
  const misplaced = BWRAP_ONLY.filter((name) => options[name] !== undefined);
  if (options.isolate !== "bwrap" && misplaced.length > 0)
    throw new TypeError(
      `localProcessSandbox: ${misplaced.join(", ")} need isolate: "bwrap" (without isolation commands see the whole host and its network)`,
    );
  const provider = {
    name: "local-process",
    create: (request: ProviderCreateRequest) => createLocal(request, options),
  };
  if (options.parentDir === undefined) return provider;
  if (options.root !== undefined)
    throw new TypeError("localProcessSandbox: give root or parentDir, not both");
  return persistentLocal(
    provider,
    options.parentDir,
    (request, placement) => createLocal(request, options, placement),
    options.isolate === "bwrap",
  );
}

async function createLocal(
  request: ProviderCreateRequest,
  options: LocalProcessSandboxOptions,
  placement?: Parameters<OpenLocal>[1],
): Promise<ProviderInstance> {
  const given = placement?.root ?? options.root;
  const owned = given === undefined;
  const safeId = request.id.replace(/[^A-Za-z0-9._-]/g, "_");
  const root = await realpath(
    owned ? await mkdtemp(join(tmpdir(), `sandbox-${safeId}-`)) : await mkdirp(resolve(given)),
  );
  const dirs = {
    workdir: join(root, "workspace"),
    home: join(root, "home"),
    tmp: join(root, "tmp"),
    state: join(root, "state"),
  };
  await Promise.all(Object.values(dirs).map(mkdirp));
  const home = options.home === "host" ? (process.env["HOME"] ?? dirs.home) : (options.home ?? dirs.home);
  const launcher =
    options.isolate === "bwrap"
      ? await bwrapLauncher(
          { etcDir: join(root, "etc"), home, writable: [...new Set([...Object.values(dirs), home])] },
          options,
        ).catch((error: unknown) => {
          if (owned) rmSync(root, { recursive: true, force: true });
          throw error;
        })
      : undefined;
  const files = new LocalFiles(root, dirs.workdir);
  const groups = new Set<number>();
  const processes = new Set<SandboxProcess>();
  let disposed = false;

  const spawn = async (command: string, opts: SpawnOptions = {}): Promise<SandboxProcess> => {
    if (disposed) throw new Error(`sandbox "${request.id}" is disposed`);
    const cwd = opts.cwd === undefined ? dirs.workdir : files.resolve(opts.cwd);
    const proc = await spawnGroup(command, {
      cwd,
      env: { ...baseEnv(home, dirs.tmp, options.inheritEnv), ...request.env, ...opts.env },
      ...(launcher !== undefined ? { launcher: [...launcher, "--chdir", cwd, "--"] } : {}),
      onGone: (pgid) => groups.delete(pgid),
    });
    if (proc.pid !== undefined) {
      groups.add(proc.pid);
      placement?.onSpawn(proc.pid);
    }
    processes.add(proc);
    void proc.exited.then(() => processes.delete(proc));
    return proc;
  };

  const disposeSync = (): void => {
    disposed = true;
    for (const pgid of groups) killGroupSync(pgid);
    if (owned) rmSync(root, { recursive: true, force: true });
  };

  return {
    id: request.id,
    provider: "local-process",
    providerId: root,
    workdir: dirs.workdir,
    stateDir: dirs.state,
    env: Object.freeze({ ...request.env }),
    files,
    // Processes share this machine's network unless bubblewrap gave them one of their own.
    ...(options.network === false ? {} : { channel: sameNetwork("http://127.0.0.1") }),
    spawn,
    importDirectory: (hostDir, dest) => cp(hostDir, files.resolve(dest), { recursive: true, force: true }),
    // Under bubblewrap, paths of this machine outside the sandbox are absent: clone those here.
    localPathsOnHost: launcher !== undefined,
    disposeSync,
    dispose: async () => {
      disposed = true;
      await Promise.all([...processes].map((proc) => proc.kill()));
      disposeSync();
    },
  };
}

async function mkdirp(path: string): Promise<string> {
  await mkdir(path, { recursive: true });
  return path;
}
