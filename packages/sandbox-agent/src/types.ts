/**
 * Public types of the SDK. Protocol shapes are reused from `@agentclientprotocol/sdk` but exported
 * under sandbox names so callers never depend on protocol vocabulary.
 */
import type * as proto from "@agentclientprotocol/sdk";

/** Free-form session metadata (title, model, mode, and any keys of your own). */
export type SessionMetadata = Record<string, unknown>;

export type PromptContent = proto.ContentBlock;
export type StopReason = proto.StopReason;
export type SessionUpdate = proto.SessionUpdate;
export type SessionModeState = proto.SessionModeState;
export type SessionConfigOption = proto.SessionConfigOption;
export type McpServerConfig = proto.McpServer;
export type PermissionOption = proto.PermissionOption;
export type ToolCallDetails = proto.ToolCallUpdate;
/** `{ outcome: "selected", optionId }` or `{ outcome: "cancelled" }`. */
export type PermissionDecision = proto.RequestPermissionOutcome;

/** What the agent asks the user to approve. */
export interface PermissionRequest {
  sessionId: string;
  toolCall: ToolCallDetails;
  options: PermissionOption[];
}

/** Decides a permission request; the default handler cancels every request. */
export type PermissionHandler = (
  request: PermissionRequest,
  context: { signal: AbortSignal },
) => PermissionDecision | Promise<PermissionDecision>;

export interface NewSessionOptions {
  cwd: string;
  metadata?: SessionMetadata;
  /** Model Context Protocol servers the agent should use in this session. */
  mcpServers?: McpServerConfig[];
  additionalDirectories?: string[];
}

export interface SessionState {
  sessionId: string;
  modes?: SessionModeState;
  configOptions?: SessionConfigOption[];
  /** Sandbox metadata the server returned with the session, if any. */
  metadata: SessionMetadata;
}

export interface LoadSessionOptions {
  sessionId: string;
  cwd: string;
  mcpServers?: McpServerConfig[];
  metadata?: SessionMetadata;
}

export type ForkSessionOptions = LoadSessionOptions;

export interface PromptOptions {
  sessionId: string;
  /** Text, or content parts (text, images, resources…). */
  prompt: string | PromptContent[];
  metadata?: SessionMetadata;
  signal?: AbortSignal;
}

export interface PromptResult {
  stopReason: StopReason;
  metadata: SessionMetadata;
}

export interface ListSessionsOptions {
  cwd?: string;
  cursor?: string;
}

/** One session as listed by the server, with the sandbox metadata surfaced as fields. */
export interface SessionSummary {
  sessionId: string;
  cwd: string;
  title?: string;
  updatedAt?: string;
  agent?: string;
  createdAt?: string;
  ended?: boolean;
  eventCount?: number;
  model?: string;
  /** Every sandbox metadata key, including the ones above. */
  metadata: SessionMetadata;
}

export interface SessionList {
  sessions: SessionSummary[];
  nextCursor?: string;
}

export interface ModelInfo {
  id: string;
  name?: string;
  description?: string;
  [key: string]: unknown;
}

export interface ModelList {
  models: ModelInfo[];
  currentModelId?: string;
  [key: string]: unknown;
}

/** What the connected agent and the server support (from the connection handshake). */
export interface AgentInfo {
  name?: string;
  version?: string;
  protocolVersion: number;
  /** Sandbox features the server advertised (e.g. `listModels`, `setMetadata`). */
  features: Record<string, unknown>;
  capabilities: Record<string, unknown>;
}
