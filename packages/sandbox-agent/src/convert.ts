/** Plain sandbox objects ⇄ protocol messages. */
import type * as proto from "@agentclientprotocol/sdk";
import { META_KEY, isRecord, metaFor, metadataOf, stringField } from "./metadata.js";
import type {
  AgentInfo,
  ModelInfo,
  ModelList,
  PromptContent,
  SessionList,
  SessionMetadata,
  SessionState,
  SessionSummary,
} from "./types.js";

export function promptBlocks(prompt: string | PromptContent[]): PromptContent[] {
  return typeof prompt === "string" ? [{ type: "text", text: prompt }] : prompt;
}

/** `_meta` carrying `metadata`, or nothing when there is none. */
export function metaField(metadata: Record<string, unknown> | undefined): {
  _meta?: Record<string, unknown>;
} {
  const meta = metaFor(metadata);
  return meta ? { _meta: meta } : {};
}

interface SessionSetup {
  modes?: proto.SessionModeState | null;
  configOptions?: proto.SessionConfigOption[] | null;
  _meta?: Record<string, unknown> | null;
}

export function sessionState(sessionId: string, result: SessionSetup | null | undefined): SessionState {
  return {
    sessionId,
    ...(result?.modes ? { modes: result.modes } : {}),
    ...(result?.configOptions ? { configOptions: result.configOptions } : {}),
    metadata: metadataOf(result),
  };
}

const SUMMARY_STRINGS = ["agent", "createdAt", "model"] as const;

function sessionSummary(info: proto.SessionInfo): SessionSummary {
  const metadata = metadataOf(info);
  const summary: SessionSummary = { sessionId: info.sessionId, cwd: info.cwd, metadata };
  const title = info.title ?? stringField(metadata, "title");
  if (title) summary.title = title;
  const updatedAt = info.updatedAt ?? stringField(metadata, "updatedAt");
  if (updatedAt) summary.updatedAt = updatedAt;
  for (const key of SUMMARY_STRINGS) {
    const value = stringField(metadata, key);
    if (value !== undefined) summary[key] = value;
  }
  if (typeof metadata.ended === "boolean") summary.ended = metadata.ended;
  if (typeof metadata.eventCount === "number") summary.eventCount = metadata.eventCount;
  return summary;
}

export function sessionList(result: proto.ListSessionsResponse): SessionList {
  return {
    sessions: result.sessions.map(sessionSummary),
    ...(result.nextCursor ? { nextCursor: result.nextCursor } : {}),
  };
}

export function modelList(result: unknown): ModelList {
  if (!isRecord(result)) return { models: [] };
  const raw = Array.isArray(result.models)
    ? result.models
    : Array.isArray(result.availableModels)
      ? result.availableModels
      : [];
  const models = raw.filter(isRecord).map(modelInfo);
  const current = stringField(result, "currentModelId");
  const { models: _models, availableModels: _available, ...rest } = result;
  return { ...rest, models, ...(current !== undefined ? { currentModelId: current } : {}) };
}

function modelInfo(raw: Record<string, unknown>): ModelInfo {
  const id = stringField(raw, "id") ?? stringField(raw, "modelId") ?? "";
  const { modelId: _modelId, ...rest } = raw;
  return { ...rest, id };
}

export function agentInfo(result: proto.InitializeResponse): AgentInfo {
  const capabilities = (result.agentCapabilities ?? {}) as Record<string, unknown>;
  const ours = isRecord(capabilities._meta) ? capabilities._meta[META_KEY] : undefined;
  const features = isRecord(ours) && isRecord(ours.extensions) ? ours.extensions : {};
  return {
    ...(result.agentInfo?.name ? { name: result.agentInfo.name } : {}),
    ...(result.agentInfo?.version ? { version: result.agentInfo.version } : {}),
    protocolVersion: result.protocolVersion,
    features,
    capabilities,
  };
}

/** `set_metadata` answers with the merged metadata under `_meta`, or directly as `metadata`. */
export function metadataResult(result: unknown): SessionMetadata {
  const fromMeta = metadataOf(result);
  if (Object.keys(fromMeta).length > 0) return fromMeta;
  const direct = isRecord(result) ? result.metadata : undefined;
  return isRecord(direct) ? { ...direct } : {};
}
