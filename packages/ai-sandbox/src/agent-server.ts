import type { AnyMessage } from "@agentclientprotocol/sdk";
import { createAcpHttpStream } from "acp-http-client";
import { SandboxAgentClient, type Processes } from "sandbox-agent";
import { RemoteFiles } from "./remote-files.js";
import type { SandboxAcpStream } from "./types.js";

/** Where a sandbox-agent server is and how the sandbox looks to it. */
export interface AgentServerOptions {
  /** Server base URL, e.g. `http://127.0.0.1:2468`. */
  baseUrl: string;
  token?: string;
  /** Server agent id used by `openAcp` (overrides the id the adapter asks for). */
  agent?: string;
  /** The server's `--workdir` (the agents' cwd) as the agent sees it; absolute. */
  workdir: string;
  /** The server's `--fs-root` as the agent sees it (the API's `/`); absolute. */
  fsRoot: string;
}

/**
 * The parts of a sandbox instance a sandbox-agent server provides, shared by every provider
 * that has one (the remote provider, containers running the bundled server): `files` over
 * `/v2/fs/*` and `openAcp` over `/v2/rpc`.
 */
export interface AgentServerLink {
  readonly files: RemoteFiles;
  /** The server's process API (`/v2/processes`), for providers that run commands through it. */
  readonly processes: Processes;
  /** Opens an ACP connection to the server's agent; `env` is added to the instance env for it. */
  openAcp(opts: { agent: string; env?: Record<string, string> }): Promise<SandboxAcpStream>;
  /** Closes every connection `openAcp` opened that is still open. */
  closeAll(): Promise<void>;
}

/** `env`: the instance env (workspace env and secrets) every agent connection carries. */
export function linkAgentServer(
  options: AgentServerOptions,
  env: Readonly<Record<string, string>>,
): AgentServerLink {
  for (const [name, value] of [
    ["workdir", options.workdir],
    ["fsRoot", options.fsRoot],
  ] as const) {
    if (!value.startsWith("/")) throw new TypeError(`${name} must be absolute, got "${value}"`);
  }
  // Files and processes only: the agent connection goes through `openAcp`, so this client never connects.
  const sdk = new SandboxAgentClient({
    baseUrl: options.baseUrl,
    agent: options.agent ?? "default",
    autoConnect: false,
    ...(options.token !== undefined ? { token: options.token } : {}),
  });
  const files = new RemoteFiles(sdk.fs, options.workdir, options.fsRoot);
  const open = new Set<SandboxAcpStream>();
  return {
    files,
    processes: sdk.processes,
    openAcp: async (opts) => {
      const stream = openAgentStream(options, {
        agent: options.agent ?? opts.agent,
        env: { ...env, ...opts.env },
      });
      open.add(stream);
      void stream.closed.then(() => open.delete(stream));
      return stream;
    },
    closeAll: async () => {
      await Promise.all([...open].map((stream) => stream.close()));
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
  options: AgentServerOptions,
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
