import { isObject, META_KEY } from "../protocol.js";
import { effectiveMetadata, listModels } from "./models.js";
import { objectAt } from "./advertise.js";
import type { SessionDescription } from "../runtime/extension.js";
import type { ConnectionState, SessionRecord, SessionStore } from "./state.js";

/** `_meta["sandboxagent.dev"]` of a session/list entry: stored metadata plus the runtime keys. */
export function listMeta(
  agentId: string,
  record: SessionRecord | undefined,
  state: ConnectionState,
  sessionId: string,
): Record<string, unknown> {
  return {
    ...effectiveMetadata(record?.metadata ?? {}, state.reported(sessionId)),
    agent: agentId,
    createdAt: record?.createdAt ?? null,
    updatedAt: record ? new Date(record.updatedMs).toISOString() : null,
    ended: record?.ended ?? false,
    eventCount: record?.eventCount ?? 0,
  };
}

/** A session for the connection list (`GET /v2/connections`): the same facts as `session/list`. */
export function describeRecord(record: SessionRecord, state: ConnectionState): SessionDescription {
  const title = typeof record.metadata.title === "string" ? record.metadata.title : record.agentTitle;
  return {
    sessionId: record.sessionId,
    title: title ?? null,
    cwd: record.cwd ?? null,
    model: listModels(state.reported(record.sessionId), record.metadata.model).currentModelId,
    createdAt: record.createdAt,
    updatedAt: new Date(record.updatedMs).toISOString(),
    ended: record.ended,
    eventCount: record.eventCount,
    metadata: structuredClone(record.metadata),
  };
}

/** Merges the server's metadata into the agent's own `session/list` answer. */
export function mergeIntoAgentList(
  result: Record<string, unknown>,
  agentId: string,
  store: SessionStore,
  state: ConnectionState,
): boolean {
  if (!Array.isArray(result.sessions)) return false;
  for (const entry of result.sessions) {
    if (!isObject(entry) || typeof entry.sessionId !== "string") continue;
    const record = store.get(agentId, entry.sessionId);
    const meta = objectAt(entry, "_meta");
    meta[META_KEY] = {
      ...(isObject(meta[META_KEY]) ? meta[META_KEY] : {}),
      ...listMeta(agentId, record, state, entry.sessionId),
    };
    if (typeof record?.metadata.title === "string") entry.title = record.metadata.title;
  }
  return true;
}

/**
 * The server's `session/list` for agents that cannot list: every session seen on this connection
 * (ended ones included), newest first, optionally filtered by `cwd`; no paging.
 */
export function fallbackList(
  params: unknown,
  agentId: string,
  store: SessionStore,
  state: ConnectionState,
): { sessions: Record<string, unknown>[] } {
  const cwd = isObject(params) && typeof params.cwd === "string" ? params.cwd : undefined;
  const sessions = [...state.seen]
    .flatMap((id) => store.get(agentId, id) ?? [])
    .filter((r) => cwd === undefined || r.cwd === cwd)
    .sort((a, b) => b.updatedMs - a.updatedMs)
    .map((r) => ({
      sessionId: r.sessionId,
      cwd: r.cwd ?? null,
      title: typeof r.metadata.title === "string" ? r.metadata.title : (r.agentTitle ?? null),
      updatedAt: new Date(r.updatedMs).toISOString(),
      _meta: { [META_KEY]: listMeta(agentId, r, state, r.sessionId) },
    }));
  return { sessions };
}
