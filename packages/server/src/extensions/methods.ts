import type { Logger } from "../log.js";
import type { ConnectionApi } from "../runtime/extension.js";
import { ERRORS, META_KEY, METHODS, type JsonRpcId, type JsonRpcMessage } from "../protocol.js";
import { effectiveMetadata, listModels, switchRequest, type ModelList } from "./models.js";
import type { SetMetadataParams } from "./param-schemas.js";
import {
  loadParamSchemas,
  METADATA_LIMITS,
  metadataOverLimit,
  sessionParamsIssues,
  type ParamsIssue,
} from "./params.js";
import type { AnsweredSwitch, ConnectionState, SessionRecord, SessionStore } from "./state.js";

/** A JSON-RPC error a handler answers with. */
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

export interface MethodContext {
  conn: ConnectionApi;
  state: ConnectionState;
  store: SessionStore;
  logger: Logger;
}

type Handler = (ctx: MethodContext, params: unknown) => unknown;

/** `_sandboxagent/*` methods by name; `notification` says whether the notification form exists. */
export const HANDLERS: ReadonlyMap<string, { handler: Handler; notification: boolean }> = new Map([
  [METHODS.detach, { handler: detach, notification: true }],
  [METHODS.terminate, { handler: terminate, notification: true }],
  [METHODS.setMetadata, { handler: setMetadata, notification: true }],
  [METHODS.listModels, { handler: listModelsOf, notification: false }],
]);

function invalidParams(method: string, issues: ParamsIssue[]): RpcError {
  return new RpcError(ERRORS.invalidParams, `Invalid params for ${method}`, { issues });
}

/** `{ sessionId }` params (checked without zod: see `sessionParamsIssues`), else a -32602. */
function sessionParams(method: string, params: unknown): { sessionId: string } {
  const checked = sessionParamsIssues(params);
  if (Array.isArray(checked)) throw invalidParams(method, checked);
  return checked;
}

/** -32602 for metadata over `METADATA_LIMITS`, naming the limit. */
export function metadataTooLarge(method: string, path: string, why: string): RpcError {
  const message = `${path} is ${why}`;
  return new RpcError(ERRORS.invalidParams, `Invalid params for ${method}: ${message}`, {
    issues: [{ path, message }],
    limits: METADATA_LIMITS,
  });
}

/** `current` with `changes` applied: a shallow merge where `null` removes a key; throws past the limits. */
function mergedMetadata(
  current: Record<string, unknown>,
  changes: Record<string, unknown>,
): Record<string, unknown> {
  const merged = { ...current };
  for (const [key, value] of Object.entries(changes)) {
    if (value === null) delete merged[key];
    else merged[key] = value;
  }
  const over = metadataOverLimit(merged);
  if (over) throw metadataTooLarge(METHODS.setMetadata, "metadata", over);
  return merged;
}

/** Extension methods act only on sessions this connection's agent created, loaded or resumed. */
function knownSession(ctx: MethodContext, sessionId: string): SessionRecord {
  const record = ctx.store.get(ctx.conn.agentId, sessionId);
  if (!ctx.state.seen.has(sessionId) || !record)
    throw new RpcError(ERRORS.resourceNotFound, `Session ${sessionId} is not known on this connection`, {
      sessionId,
    });
  return record;
}

/** Answers the session's open permission requests `cancelled` in the client's stead. */
function cancelPermissions(ctx: MethodContext, sessionId: string): void {
  for (const [key, pending] of ctx.state.pendingPermissions) {
    if (pending.sessionId !== sessionId) continue;
    ctx.state.pendingPermissions.delete(key);
    ctx.state.serverAnswered.add(key);
    cancelPermissionRequest(ctx.conn, pending.id);
  }
}

/** Answers an agent permission request `cancelled`, as a client does for a cancelled turn. */
export function cancelPermissionRequest(conn: ConnectionApi, id: JsonRpcId): void {
  void conn.forward({ jsonrpc: "2.0", id, result: { outcome: { outcome: "cancelled" } } });
}

function detach(ctx: MethodContext, params: unknown): Record<string, never> {
  const { sessionId } = sessionParams(METHODS.detach, params);
  const record = knownSession(ctx, sessionId);
  ctx.state.mute(sessionId);
  cancelPermissions(ctx, sessionId);
  record.updatedMs = Date.now();
  ctx.store.changed(record);
  return {};
}

async function terminate(ctx: MethodContext, params: unknown): Promise<Record<string, never>> {
  const { sessionId } = sessionParams(METHODS.terminate, params);
  const record = knownSession(ctx, sessionId);
  if (record.ended) return {};
  // Everything up to the first await is written now, before any later client message.
  void ctx.conn.forward({ jsonrpc: "2.0", method: "session/cancel", params: { sessionId } });
  cancelPermissions(ctx, sessionId);
  ctx.state.mute(sessionId);
  const close = ctx.state.agentCloses ? ctx.conn.request("session/close", { sessionId }) : undefined;
  record.ended = true;
  record.updatedMs = Date.now();
  ctx.store.save(record);
  ctx.conn.forgetSession(sessionId);
  const closed = close ? await close : undefined;
  if (closed?.error)
    ctx.logger.warn("agent refused session/close on terminate", { sessionId, error: closed.error });
  ctx.conn.emit({
    jsonrpc: "2.0",
    method: METHODS.ended,
    params: { sessionId, reason: "terminated", closed: closed !== undefined && !closed.error },
  });
  return {};
}

function listModelsOf(ctx: MethodContext, params: unknown): ModelList {
  const { sessionId } = sessionParams(METHODS.listModels, params);
  const record = knownSession(ctx, sessionId);
  return listModels(ctx.state.reported(sessionId), record.metadata.model);
}

async function setMetadata(ctx: MethodContext, params: unknown): Promise<Record<string, unknown>> {
  const { setMetadataParams, issuesOf } = await loadParamSchemas();
  const parsed = setMetadataParams.safeParse(params);
  if (!parsed.success) throw invalidParams(METHODS.setMetadata, issuesOf(parsed.error));
  const { sessionId, metadata } = parsed.data;
  const record = knownSession(ctx, sessionId);
  mergedMetadata(record.metadata, metadata); // refused before anything reaches the agent
  await applyToAgent(ctx, sessionId, metadata);
  record.metadata = mergedMetadata(record.metadata, metadata); // again: another call may have run meanwhile
  record.updatedMs = Date.now();
  ctx.store.save(record);
  if ("title" in metadata && !ctx.state.muted.has(sessionId)) announceTitle(ctx, sessionId, record);
  return { _meta: { [META_KEY]: effectiveMetadata(record.metadata, ctx.state.reported(sessionId)) } };
}

/**
 * `mode` and `model` switch the agent when it offers a way (else they stay hints); the first
 * agent error fails the call with `data: {key, method, error}` after every switch was answered.
 */
export async function applyToAgent(
  ctx: Pick<MethodContext, "conn" | "state">,
  sessionId: string,
  metadata: Pick<SetMetadataParams["metadata"], "mode" | "model">,
): Promise<void> {
  const agentState = ctx.state.agentState(sessionId);
  const switches = (["mode", "model"] as const).flatMap((key) => {
    const value = metadata[key];
    const request = typeof value === "string" ? switchRequest(agentState, sessionId, key, value) : undefined;
    return request ? [{ key, ...request, response: ctx.conn.request(request.method, request.params) }] : [];
  });
  let failure: RpcError | undefined;
  const answered: AnsweredSwitch[] = [];
  for (const s of switches) {
    const response = await s.response;
    if (response.error) {
      failure ??= new RpcError(
        response.error.code,
        `The agent rejected ${s.key}: ${response.error.message}`,
        {
          key: s.key,
          method: s.method,
          error: response.error,
        },
      );
    } else answered.push({ method: s.method, params: s.params, result: response.result });
  }
  ctx.state.absorbSwitches(sessionId, answered);
  if (failure) throw failure;
}

/** Tells the client about the new title the way agents do, marked as coming from the server. */
function announceTitle(ctx: MethodContext, sessionId: string, record: SessionRecord): void {
  ctx.conn.emit({
    jsonrpc: "2.0",
    method: "session/update",
    params: {
      sessionId,
      update: {
        sessionUpdate: "session_info_update",
        title:
          typeof record.metadata.title === "string" ? record.metadata.title : (record.agentTitle ?? null),
        updatedAt: new Date(record.updatedMs).toISOString(),
        _meta: { [META_KEY]: { origin: "set_metadata" } },
      },
    },
  });
}

/** Runs a `_sandboxagent/*` message; requests are answered on the connection stream. */
export function runExtensionMethod(ctx: MethodContext, message: JsonRpcMessage): void {
  const isRequest = message.id !== undefined && message.id !== null;
  const entry = HANDLERS.get(message.method!);
  const respond = (reply: Omit<JsonRpcMessage, "jsonrpc" | "id">): void => {
    if (isRequest) ctx.conn.emit({ jsonrpc: "2.0", id: message.id, ...reply });
    else if (reply.error)
      ctx.logger.warn("extension notification failed", { method: message.method, error: reply.error });
  };
  if (!entry || (!isRequest && !entry.notification)) {
    respond({ error: { code: ERRORS.methodNotFound, message: `Method not found: ${message.method}` } });
    return;
  }
  const fail = (error: unknown): void => {
    const e = error instanceof RpcError ? error : new RpcError(ERRORS.internal, String(error));
    respond({
      error:
        e.data === undefined
          ? { code: e.code, message: e.message }
          : { code: e.code, message: e.message, data: e.data },
    });
  };
  try {
    // Handlers write to the agent before their first await, so ordering with later messages holds.
    Promise.resolve(entry.handler(ctx, message.params))
      .then((result) => respond({ result }), fail)
      // Nothing else awaits this chain: an error here would be an unhandled rejection, ending the server.
      .catch((error: unknown) =>
        ctx.logger.error("extension method failed", { method: message.method, error: String(error) }),
      );
  } catch (error) {
    fail(error);
  }
}
