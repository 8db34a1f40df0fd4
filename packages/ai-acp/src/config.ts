import type {
  ContentBlock,
  RequestPermissionRequest,
  RequestPermissionResponse,
  Stream,
} from "@agentclientprotocol/sdk";
import type { JSONSchema, ModelMessage } from "@tanstack/ai";
import type { SandboxInstance } from "@sandbox-agent/ai-sandbox";
import type { SessionStore } from "@sandbox-agent/session-store";

/** `'api-key'` calls ACP `authenticate` with `authMethodId`; `'host'` skips it (the CLI's own login is used). */
export type AuthMode = "api-key" | "host";
/** How permission requests are answered when no `onPermissionRequest` decides. */
export type PermissionMode = "default" | "acceptEdits" | "bypassPermissions";
/** `'headless'` resolves every request without a human; `'interactive'` pauses the turn for the client. */
export type PermissionStrategy = "headless" | "interactive";

/** Per-call options every ACP harness accepts through `chat({ modelOptions })`. */
export interface AcpBaseModelOptions {
  /** Harness session id from a previous `<name>.session-id` event: resume that session. */
  sessionId?: string;
  /** Working directory inside the sandbox for this call (overrides the config `cwd`). */
  cwd?: string;
  authMode?: AuthMode;
  authMethodId?: string;
  permissionMode?: PermissionMode;
}

/** The declared options merged with the base ones. */
export type AcpModelOptions<TOptions extends object> = TOptions & AcpBaseModelOptions;

/** What `command` and `openTransport` receive. */
export interface AcpLaunchContext<TModel extends string, TOptions extends object> {
  model: TModel;
  /** Session working directory (absolute, inside the sandbox). */
  cwd: string;
  /** Same as `cwd`, named for its usual use: the harness' own `--cwd` flag (`pi --acp --cwd ${harnessCwd}`). */
  harnessCwd: string;
  sandbox: SandboxInstance;
  /** Environment for the agent process: sandbox env + config `env`. */
  env: Readonly<Record<string, string>>;
  modelOptions: AcpModelOptions<TOptions> | undefined;
  signal: AbortSignal;
}

export interface ExitInfo {
  code: number | null;
  signal: string | null;
}

/** An open ACP connection to one agent. `dispose` owns every cleanup step. */
export interface AcpSessionTransport {
  readonly kind: "stream";
  readonly stream: Stream;
  dispose(): Promise<void>;
  /** Settles when the agent behind the transport is gone (process exit, socket close). */
  readonly exited?: Promise<ExitInfo>;
  /** Recent agent stderr, for error reports. */
  stderrTail?(): string;
}

/** A permission request as the adapter hands it to `onPermissionRequest`. */
export interface PermissionRequestInfo extends RequestPermissionRequest {
  /** Tool kind as reported by the agent's earlier `tool_call` updates, when the request omits it. */
  readonly knownKind: string | undefined;
  readonly signal: AbortSignal;
}

export type PermissionHandler = (
  request: PermissionRequestInfo,
) => Promise<RequestPermissionResponse["outcome"]> | RequestPermissionResponse["outcome"];

export interface BuildPromptContext {
  messages: ReadonlyArray<ModelMessage>;
  /** True when the agent already holds the earlier history (warm session or resume). */
  resumed: boolean;
  outputSchema: JSONSchema | undefined;
  systemPrompts: ReadonlyArray<string>;
}

export type PromptBuilder = (ctx: BuildPromptContext) => string | ContentBlock[];

export interface ExtNotification {
  method: string;
  params: unknown;
}

export interface AcpCompatibleConfig<
  TModels extends ReadonlyArray<string> = ReadonlyArray<string>,
  TOptions extends object = Record<never, never>,
> {
  /** Harness label: log prefix and the `<name>.session-id` / `<name>.message-content` event names. */
  name: string;
  /** Accepted model ids; when declared, unknown ids are a compile-time error. */
  models?: TModels;
  /** Type-only brand (`{} as { … }`) describing extra `chat({ modelOptions })` fields. Never read at runtime. */
  modelOptions?: TOptions;
  /** Builds the shell command that starts the agent's ACP server on stdio. Required unless `openTransport` is set. */
  command?: (ctx: AcpLaunchContext<TModels[number], TOptions>) => string;
  /** Opens the transport yourself (e.g. a WebSocket ACP server in the sandbox). Wins over `command`. */
  openTransport?: (ctx: AcpLaunchContext<TModels[number], TOptions>) => Promise<AcpSessionTransport>;
  /** Harness skills directory relative to the workspace root (e.g. `.pi/skills`). Read by the sandbox layer. */
  skillsDir?: string;
  /** Working directory inside the sandbox; default: the sandbox workdir (`/workspace` in container sandboxes). */
  cwd?: string;
  /** Extra environment variables for the agent process. */
  env?: Record<string, string>;
  /** Default `'api-key'`. */
  authMode?: AuthMode;
  /** ACP auth method passed to `authenticate` (must be one the agent advertises). Ignored for `'host'`. */
  authMethodId?: string;
  /** Default `'bypassPermissions'`. */
  permissionMode?: PermissionMode;
  /** Default `'headless'`. */
  permissions?: PermissionStrategy;
  /** Custom permission decision; wins over `permissions` and `permissionMode`. */
  onPermissionRequest?: PermissionHandler;
  /** RUN_ERROR message when the agent stops with `refusal`. */
  refusalMessage?: string;
  /** Emit ACP `plan` updates as CUSTOM events with this name. */
  planEventName?: string;
  /** After each turn, emit the workspace changes as `file.changed` CUSTOM events. Default false. */
  emitDiff?: boolean;
  /** Receives vendor `_…` JSON-RPC notifications. */
  onExtNotification?: (notification: ExtNotification) => void;
  /** Replaces the chat-history → prompt mapping. */
  buildPrompt?: PromptBuilder;
  /** Time allowed for spawn + `initialize` (+ `authenticate`). Default 30 s. */
  initializeTimeoutMs?: number;
  /** Time allowed for one prompt turn, including waits for approvals and tool results. Default 10 min. */
  turnTimeoutMs?: number;
  /** Keep the agent process of a thread alive between turns for this long. Default 5 min; 0 = cold start per call. */
  keepWarmMs?: number;
  /**
   * A store shared by the application's replicas (`@sandbox-agent/session-store`): each thread's
   * agent session is recorded there (record id = thread id), and a replica that starts a thread
   * cold reopens the recorded session instead of starting a new one.
   */
  store?: SessionStore;
}

export const DEFAULTS = {
  initializeTimeoutMs: 30_000,
  turnTimeoutMs: 600_000,
  keepWarmMs: 300_000,
  cancelGraceMs: 3_000,
} as const;
