import type { McpServer, Stream } from "@agentclientprotocol/sdk";
import { createCapability } from "@tanstack/ai";

/** A process running inside a sandbox, in its own process group. */
export interface SandboxProcess {
  readonly pid: number | undefined;
  readonly stdin: WritableStream<Uint8Array>;
  readonly stdout: ReadableStream<Uint8Array>;
  /** Last ~64 KiB of stderr; stderr is always drained so the process never blocks on it. */
  stderrTail(): string;
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  /** SIGTERM the process group, SIGKILL after a grace period; resolves when gone. */
  kill(): Promise<void>;
}

export interface SandboxFileEntry {
  /** Relative to the listed directory, `/`-separated. */
  path: string;
  type: "file" | "directory";
}

export interface ListFilesOptions {
  /** Entry names (any depth) to leave out, without descending into them, e.g. `[".git", "node_modules"]`. */
  exclude?: readonly string[];
}

/** Paths are relative to the instance workdir, or absolute inside the sandbox. */
export interface SandboxFiles {
  /** `undefined` when the file does not exist. */
  readFile(path: string): Promise<Uint8Array | undefined>;
  /** Creates parent directories. */
  writeFile(path: string, data: Uint8Array | string): Promise<void>;
  /** Recursive listing, sorted per directory; `[]` when the directory does not exist. */
  list(dir: string, options?: ListFilesOptions): Promise<SandboxFileEntry[]>;
  /** Removes a file or directory tree; no error when missing. */
  remove(path: string): Promise<void>;
  /** Create a symlink at `linkPath` pointing to `target` (replacing what is there). Absent when unsupported. */
  symlink?(target: string, linkPath: string): Promise<void>;
}

export interface SpawnOptions {
  cwd?: string;
  env?: Record<string, string>;
}

/** An ACP connection opened natively by the provider; `close` releases it. */
export type SandboxAcpStream = Stream & { close(): Promise<void> };

/** An mcpSkill as ACP `session/new` takes it (secrets resolved); filter by the agent's `mcpCapabilities`. */
export type ResolvedMcpServer = McpServer;

/** A git skill after bootstrap: cloned to `path` (absolute, inside the sandbox). */
export interface ProvisionedGitSkill {
  name: string;
  path: string;
}

/** What bootstrap produced that the harness adapter places (see `placeSkills`). */
export interface ProvisionedWorkspace {
  /** mcpSkill entries, for ACP `session/new` `mcpServers`. */
  readonly mcpServers: ReadonlyArray<ResolvedMcpServer>;
  /** gitSkill entries, cloned; the adapter links them into its `skillsDir`. */
  readonly gitSkills: ReadonlyArray<ProvisionedGitSkill>;
  /** Skills without a generic ACP placement (agentSkill, …), skipped with a warning. */
  readonly warnings: ReadonlyArray<string>;
}

/** How this machine reaches a port the sandbox listens on. */
export interface SandboxChannel {
  /**
   * `http://<host>` without a port: the address of the sandbox as seen from this machine
   * (`http://127.0.0.1` for a local sandbox, the server's host for a remote one).
   */
  readonly url: string;
  /**
   * The port of `url` that reaches `port` inside the sandbox: the same port when the sandbox
   * shares the network of `url`, a published port for a container. Rejects, saying what to
   * change, when the port cannot be reached.
   */
  reach(port: number): Promise<number>;
}

export interface SandboxInstance {
  readonly id: string;
  /** `"local-process"` | `"sandbox-agent"` | … */
  readonly provider: string;
  /** Absolute path of the workspace inside the sandbox. */
  readonly workdir: string;
  /** Declared env + secrets for agent processes. Held in memory only, never persisted. */
  readonly env: Readonly<Record<string, string>>;
  readonly files: SandboxFiles;
  /**
   * How this machine reaches servers listening inside the sandbox (an agent's own WebSocket ACP
   * server). Absent when the sandbox has no network this machine can reach.
   */
  readonly channel?: SandboxChannel;
  /** Skills/MCP servers produced by the workspace bootstrap. Empty when there is no workspace. */
  readonly workspace: ProvisionedWorkspace;
  /** Run a shell command inside the sandbox (own process group, env = minimal base + this.env + opts.env). */
  spawn(command: string, opts?: SpawnOptions): Promise<SandboxProcess>;
  /**
   * Provider-native ACP connection (the sandbox-agent provider: the server's /v2/rpc for agent id `agent`).
   * When absent the adapter spawns its `command` over stdio.
   */
  openAcp?(opts: { agent: string; env?: Record<string, string> }): Promise<SandboxAcpStream>;
  dispose(): Promise<void>;
}

/** Provided by `withSandbox`; read by harness adapters with `getSandbox(options.capabilities)`. */
export const SandboxCapability = createCapability<SandboxInstance>()("sandbox");
export const [getSandbox, provideSandbox] = SandboxCapability;
