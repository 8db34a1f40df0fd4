import { linkAgentServer } from "./agent-server.js";
import type { ProviderCreateRequest, ProviderInstance, SandboxProvider } from "./provider.js";
import { uploadDirectory } from "./remote-files.js";

const DEFAULT_WORKDIR = "/workspace";

export interface SandboxAgentSandboxOptions {
  /** Server base URL, e.g. `http://127.0.0.1:2468`. */
  baseUrl: string;
  token?: string;
  /** Server agent id used by `openAcp` (overrides the id the adapter asks for). */
  agent?: string;
  /** The server's `--workdir` (the agents' cwd) as the agent sees it. Default `/workspace`. */
  workdir?: string;
  /** The server's `--fs-root` as the agent sees it (the API's `/`). Default: `workdir`, like the server. */
  fsRoot?: string;
}

/** A remote sandbox reached through a sandbox-agent server: files via `/v2/fs/*`, the agent via `/v2/rpc`. */
export function sandboxAgentSandbox(options: SandboxAgentSandboxOptions): SandboxProvider {
  return { name: "sandbox-agent", create: (request) => createRemote(request, options) };
}

async function createRemote(
  request: ProviderCreateRequest,
  options: SandboxAgentSandboxOptions,
): Promise<ProviderInstance> {
  const workdir = options.workdir ?? DEFAULT_WORKDIR;
  let server;
  try {
    server = linkAgentServer({ ...options, workdir, fsRoot: options.fsRoot ?? workdir }, request.env);
  } catch (error) {
    throw new TypeError(`sandboxAgentSandbox: ${(error as Error).message}`);
  }
  const { files } = server;
  return {
    id: request.id,
    provider: "sandbox-agent",
    workdir,
    stateDir: `${workdir}/.sandbox`,
    env: Object.freeze({ ...request.env }),
    files,
    canSpawn: false,
    spawn: () =>
      Promise.reject(
        new Error("the sandbox-agent provider cannot run shell commands; the agent is reached via openAcp"),
      ),
    importDirectory: (hostDir, dest) => uploadDirectory(files, hostDir, dest),
    openAcp: server.openAcp,
    dispose: () => server.closeAll(),
  };
}
