import { posix } from "node:path";
import type { AnyMessage } from "@agentclientprotocol/sdk";
import { createAcpHttpStream } from "acp-http-client";
import type { ProviderCreateRequest, ProviderInstance, SandboxProvider } from "./provider.js";
import { SandboxAgentClient } from "sandbox-agent";
import { RemoteFiles, uploadDirectory } from "./remote-files.js";
import { spawnRemote } from "./remote-process.js";
import type { SandboxAcpStream, SandboxProcess, SpawnOptions } from "./types.js";

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
  // Files and processes only: the agent connection goes through `openAcp`, so this client never connects.
  const sdk = new SandboxAgentClient({
    baseUrl: options.baseUrl,
    agent: options.agent ?? "default",
    autoConnect: false,
    ...(options.token !== undefined ? { token: options.token } : {}),
  });
  const workdir = options.workdir ?? DEFAULT_WORKDIR;
  const fsRoot = options.fsRoot ?? workdir;
  for (const [name, value] of [
    ["workdir", workdir],
    ["fsRoot", fsRoot],
  ]) {
    if (!value?.startsWith("/"))
      throw new TypeError(`sandboxAgentSandbox: ${name} must be absolute, got "${value}"`);
  }
  const files = new RemoteFiles(sdk.fs, workdir, fsRoot);
  const open = new Set<SandboxAcpStream>();
  const openAcp = async (opts: {
    agent: string;
    env?: Record<string, string>;
  }): Promise<SandboxAcpStream> => {
    const stream = openAgentStream(options, {
      agent: options.agent ?? opts.agent,
      env: { ...request.env, ...opts.env },
    });
    open.add(stream);
    void stream.closed.then(() => open.delete(stream));
    return stream;
  };
  const processes = new Set<SandboxProcess>();
  let disposed = false;
  const spawn = async (command: string, opts: SpawnOptions = {}): Promise<SandboxProcess> => {
    if (disposed) throw new Error(`sandbox "${request.id}" is disposed`);
    const proc = await spawnRemote(sdk.processes, command, {
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
    spawn,
    importDirectory: (hostDir, dest) => uploadDirectory(files, hostDir, dest),
    openAcp,
    dispose: async () => {
      disposed = true;
      await Promise.all([
        ...[...open].map((stream) => stream.close()),
        ...[...processes].map((proc) => proc.kill()),
      ]);
    },
  };
}

interface LaunchMeta {
  agent: string;
  env: Record<string, string>;
}

function launchFields({ agent, env }: LaunchMeta): Record<string, unknown> {
  return Object.keys(env).length === 0 ? { agent } : { agent, env };
}

/**
 * The server picks the agent from `initialize`'s `_meta["sandboxagent.dev"].agent` (the protocol-pure
 * client does not add it); `env` carries the workspace env and secrets for the agent process.
 */
function withLaunchMeta(message: AnyMessage, launch: LaunchMeta): AnyMessage {
  if (!("method" in message) || message.method !== "initialize" || !("id" in message)) return message;
  const params = (message.params ?? {}) as { _meta?: Record<string, unknown> };
  const ours = (params._meta?.["sandboxagent.dev"] ?? {}) as Record<string, unknown>;
  return {
    ...message,
    params: {
      ...params,
      _meta: { ...params._meta, "sandboxagent.dev": { ...ours, ...launchFields(launch) } },
    },
  };
}

function openAgentStream(
  options: SandboxAgentSandboxOptions,
  launch: LaunchMeta,
): SandboxAcpStream & { closed: Promise<unknown> } {
  const http = createAcpHttpStream({
    baseUrl: options.baseUrl,
    ...(options.token ? { token: options.token } : {}),
  });
  const tagging = new TransformStream<AnyMessage, AnyMessage>({
    transform: (message, controller) => controller.enqueue(withLaunchMeta(message, launch)),
  });
  // Write failures surface on `tagging.writable` (the pipe errors it); nothing to report here.
  void tagging.readable.pipeTo(http.writable).catch(() => undefined);
  return {
    readable: http.readable,
    writable: tagging.writable,
    closed: http.closed,
    close: () => http.close(),
  };
}
