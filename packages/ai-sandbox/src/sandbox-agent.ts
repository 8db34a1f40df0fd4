import { posix } from "node:path";
import { SandboxAgentClient } from "sandbox-agent";
import { linkAgentServer } from "./agent-server.js";
import { hostUrl, sameNetwork } from "./channel.js";
import type { ProviderCreateRequest, ProviderInstance, SandboxProvider } from "./provider.js";
import { uploadDirectory } from "./remote-files.js";
import { spawnRemote } from "./remote-process.js";
import type { SandboxProcess, SpawnOptions } from "./types.js";

export interface SandboxAgentSandboxOptions {
  /** Server base URL, e.g. `http://127.0.0.1:2468`. */
  baseUrl: string;
  token?: string;
  /** Server agent id used by `openAcp` (overrides the id the adapter asks for). */
  agent?: string;
  /** The server's `--workdir` (the agents' cwd) as the agent sees it. Default: what `/v2/health` reports. */
  workdir?: string;
  /** The server's `--fs-root` as the agent sees it (the API's `/`). Default: what `/v2/health` reports. */
  fsRoot?: string;
}

/**
 * A remote sandbox reached through a sandbox-agent server: files via `/v2/fs/*`, commands via
 * `/v2/processes`, the agent via `/v2/rpc`.
 */
export function sandboxAgentSandbox(options: SandboxAgentSandboxOptions): SandboxProvider {
  return { name: "sandbox-agent", create: (request) => createRemote(request, options) };
}

async function createRemote(
  request: ProviderCreateRequest,
  options: SandboxAgentSandboxOptions,
): Promise<ProviderInstance> {
  const { workdir, fsRoot } = await serverDirectories(options);
  let server;
  try {
    server = linkAgentServer({ ...options, workdir, fsRoot }, request.env);
  } catch (error) {
    throw new TypeError(`sandboxAgentSandbox: ${(error as Error).message}`);
  }
  const { files } = server;
  const processes = new Set<SandboxProcess>();
  let disposed = false;
  const spawn = async (command: string, opts: SpawnOptions = {}): Promise<SandboxProcess> => {
    if (disposed) throw new Error(`sandbox "${request.id}" is disposed`);
    const proc = await spawnRemote(server.processes, command, {
      cwd: opts.cwd === undefined ? workdir : posix.resolve(workdir, opts.cwd),
      env: { ...request.env, ...opts.env },
    });
    processes.add(proc);
    void proc.exited.then(() => processes.delete(proc));
    return proc;
  };
  return {
    id: request.id,
    provider: "sandbox-agent",
    workdir,
    stateDir: `${workdir}/.sandbox`,
    env: Object.freeze({ ...request.env }),
    files,
    // Commands run on the server's machine: its ports are those of the server's host.
    channel: sameNetwork(hostUrl(options.baseUrl)),
    spawn,
    importDirectory: (hostDir, dest) => uploadDirectory(files, hostDir, dest),
    openAcp: server.openAcp,
    dispose: async () => {
      disposed = true;
      await Promise.all([server.closeAll(), ...[...processes].map((proc) => proc.kill())]);
    },
  };
}

/**
 * The server's workdir and file API root: those given, else what the server reports in
 * `/v2/health` (a server without `fsRoot` there serves the file API from its workdir).
 */
async function serverDirectories(
  options: SandboxAgentSandboxOptions,
): Promise<{ workdir: string; fsRoot: string }> {
  if (options.workdir !== undefined)
    return { workdir: options.workdir, fsRoot: options.fsRoot ?? options.workdir };
  const client = new SandboxAgentClient({
    baseUrl: options.baseUrl,
    agent: options.agent ?? "default",
    autoConnect: false,
    ...(options.token !== undefined ? { token: options.token } : {}),
  });
  let health;
  try {
    health = await client.health();
  } catch (error) {
    throw new Error(
      `sandboxAgentSandbox: cannot read ${options.baseUrl}/v2/health to learn the server's workdir ` +
        `(${(error as Error).message}); check baseUrl and token, or pass workdir`,
      { cause: error },
    );
  }
  return { workdir: health.workdir, fsRoot: options.fsRoot ?? health.fsRoot ?? health.workdir };
}
