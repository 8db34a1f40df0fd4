import type { Logger } from "../log.js";
import type { ConnectionApi, ConnectionExtension, SessionDescription } from "../runtime/extension.js";
import {
  EXTENSION_PREFIX,
  idKey,
  isObject,
  kindOf,
  META_KEY,
  sandboxMetaOf,
  sessionIdOf,
  type JsonRpcId,
  type JsonRpcMessage,
  type MessageKind,
} from "../protocol.js";
import {
  applyToAgent,
  cancelPermissionRequest,
  metadataTooLarge,
  RpcError,
  runExtensionMethod,
} from "./methods.js";
import { currentMode, listModels, currentValue } from "./models.js";
import { metadataOverLimit } from "./params.js";
import { advertiseExtensions } from "./advertise.js";
import { describeRecord, fallbackList, mergeIntoAgentList } from "./session-list.js";
import type { StateTable } from "../store/event-store.js";
import {
  ConnectionState,
  ConnectionStates,
  SessionStore,
  type AgentSessionState,
  type SavedConnectionState,
  type SessionRecord,
} from "./state.js";

const CREATES = new Set(["session/new", "session/fork"]);
const ATTACHES = new Set(["session/load", "session/resume"]);
/** The ACP methods `clientMessage` acts on (besides `_sandboxagent/*`). */
const CLIENT_METHODS_SEEN = new Set([...CREATES, ...ATTACHES, "session/list"]);
/** The methods whose successful answers `agentResponse` acts on. */
const AGENT_RESPONSES_SEEN = new Set([
  ...CLIENT_METHODS_SEEN,
  "session/set_config_option",
  "session/set_mode",
  "session/set_model",
]);

/** `_sandboxagent/*` methods and `_meta["sandboxagent.dev"]` handling; see the README's "Sandbox extensions". */
export class SandboxExtension implements ConnectionExtension {
  private readonly store: SessionStore;
  private readonly states: ConnectionStates;

  constructor(
    private readonly logger: Logger,
    tables: {
      sessions?: StateTable<SessionRecord> | undefined;
      connections?: StateTable<SavedConnectionState> | undefined;
    } = {},
  ) {
    this.store = new SessionStore(tables.sessions);
    this.states = new ConnectionStates(tables.connections);
  }

  initializeResult(result: Record<string, unknown>, conn: ConnectionApi): void {
    const state = this.states.of(conn);
    const capabilities = isObject(result.agentCapabilities) ? result.agentCapabilities : {};
    const sessions = isObject(capabilities.sessionCapabilities) ? capabilities.sessionCapabilities : {};
    state.agentLists = isObject(sessions.list);
    state.agentCloses = isObject(sessions.close);
    advertiseExtensions(result);
  }

  clientMessage(message: JsonRpcMessage, conn: ConnectionApi): boolean {
    const state = this.states.of(conn);
    const kind = kindOf(message);
    if (kind === "response") return this.clientResponse(message.id as JsonRpcId, state);
    const method = message.method;
    if (method === undefined) return false;
    // Most client messages (session/prompt, session/cancel…) need nothing here: the rest is in a
    // function of its own, which TurboFan does not inline into the request path it compiles in a
    // connection's first requests (bench/README.md, Cold window).
    if (!method.startsWith(EXTENSION_PREFIX) && !CLIENT_METHODS_SEEN.has(method)) return false;
    return this.clientMethod(message, method, kind, state, conn);
  }

  /** `clientMessage` and `agentResponse` read nothing of other methods' messages but their id and method. */
  readsParams(method: string): boolean {
    return method.startsWith(EXTENSION_PREFIX) || AGENT_RESPONSES_SEEN.has(method);
  }

  /** `clientMessage` for `_sandboxagent/*` and the methods of `CLIENT_METHODS_SEEN`. */
  private clientMethod(
    message: JsonRpcMessage,
    method: string,
    kind: MessageKind,
    state: ConnectionState,
    conn: ConnectionApi,
  ): boolean {
    if (method.startsWith(EXTENSION_PREFIX)) {
      runExtensionMethod({ conn, state, store: this.store, logger: this.logger }, message);
      return true;
    }
    if (method === "session/list" && kind === "request" && !state.agentLists) {
      const result = fallbackList(message.params, conn.agentId, this.store, state);
      conn.emit({ jsonrpc: "2.0", id: message.id, result });
      return true;
    }
    if (
      (CREATES.has(method) || ATTACHES.has(method)) &&
      kind === "request" &&
      this.refuseMetadata(message, conn)
    )
      return true;
    // Re-attach before the agent replays history, so the replay is delivered.
    const sessionId = sessionIdOf(message);
    if (ATTACHES.has(method) && sessionId !== undefined) state.unmute(sessionId);
    return false;
  }

  /**
   * `_meta["sandboxagent.dev"]` of a session/new, fork, load or resume is stored with what the
   * session has already (`adopt`): past the metadata limits the request is answered -32602 here
   * and never reaches the agent.
   */
  private refuseMetadata(message: JsonRpcMessage, conn: ConnectionApi): boolean {
    const meta = sandboxMetaOf(message.params);
    if (meta === undefined) return false;
    const source = sessionIdOf(message);
    const current = source === undefined ? undefined : this.store.get(conn.agentId, source)?.metadata;
    const over = metadataOverLimit({ ...current, ...meta });
    if (over === undefined) return false;
    const error = metadataTooLarge(message.method!, `_meta.${META_KEY}`, over);
    conn.emit({
      jsonrpc: "2.0",
      id: message.id,
      error: { code: error.code, message: error.message, data: error.data },
    });
    return true;
  }

  /** A client answer to a request the server already answered is swallowed, not sent twice. */
  private clientResponse(id: JsonRpcId, state: ConnectionState): boolean {
    const key = idKey(id);
    state.pendingPermissions.delete(key);
    return state.serverAnswered.delete(key);
  }

  readsAgentResult(request: JsonRpcMessage): boolean {
    return request.method !== undefined && AGENT_RESPONSES_SEEN.has(request.method);
  }

  agentResponse(response: JsonRpcMessage, request: JsonRpcMessage, conn: ConnectionApi): boolean | "held" {
    // Most answers (session/prompt's…) need nothing here, and skip the parse (`readsAgentResult`);
    // the rest is in a function of its own (see `clientMessage`).
    if (response.error || !this.readsAgentResult(request)) return false;
    return this.agentMethodResponse(response, request, request.method!, conn);
  }

  /** `agentResponse` for the methods of `AGENT_RESPONSES_SEEN`. */
  private agentMethodResponse(
    response: JsonRpcMessage,
    request: JsonRpcMessage,
    method: string,
    conn: ConnectionApi,
  ): boolean | "held" {
    const state = this.states.of(conn);
    if (CREATES.has(method) || ATTACHES.has(method)) {
      const sessionId = CREATES.has(method)
        ? isObject(response.result) && typeof response.result.sessionId === "string"
          ? response.result.sessionId
          : undefined
        : sessionIdOf(request);
      if (sessionId === undefined) return false;
      this.adopt(conn, state, sessionId, request, response.result);
      return this.applyRequested(conn, state, sessionId, request, response);
    }
    const sessionId = sessionIdOf(request);
    if (method === "session/set_config_option" && sessionId !== undefined) {
      state.absorb(sessionId, response.result);
    }
    if ((method === "session/set_mode" || method === "session/set_model") && sessionId !== undefined) {
      const params = isObject(request.params) ? request.params : {};
      state.absorbSwitches(sessionId, [{ method, params, result: {} }]);
    }
    if (method === "session/list" && isObject(response.result))
      return mergeIntoAgentList(response.result, conn.agentId, this.store, state);
    return false;
  }

  /** A session created, loaded, resumed or forked on this connection: ingest its metadata and agent state. */
  private adopt(
    conn: ConnectionApi,
    state: ConnectionState,
    sessionId: string,
    request: JsonRpcMessage,
    result: unknown,
  ): void {
    const record = this.store.touch(conn.agentId, sessionId);
    const params = isObject(request.params) ? request.params : {};
    if (typeof params.cwd === "string") record.cwd = params.cwd;
    // A fork starts with its source's metadata.
    const source = request.method === "session/fork" ? sessionIdOf(request) : undefined;
    const inherited = source === undefined ? undefined : this.store.get(conn.agentId, source)?.metadata;
    Object.assign(record.metadata, inherited ?? {}, sandboxMetaOf(params) ?? {});
    record.ended = false;
    record.updatedMs = Date.now();
    this.store.save(record);
    state.adopt(sessionId, result);
  }

  /**
   * `model` and `mode` in the metadata of a session/new, fork, load or resume are applied the way
   * `set_metadata` applies them (`session/set_config_option`, `set_model`, `set_mode`), before the
   * client gets the session: its answer is held until the agent answered the switches, then sent
   * with the session's new state (`configOptions`, `models`, `modes`). If the agent refuses one,
   * the client's request fails with the agent's error (`data: {key, method, error, sessionId}`)
   * and a session it created is closed again, so a client never works in a session with a model
   * it did not ask for. A key the agent offers no way to switch stays a hint, as with set_metadata.
   */
  private applyRequested(
    conn: ConnectionApi,
    state: ConnectionState,
    sessionId: string,
    request: JsonRpcMessage,
    response: JsonRpcMessage,
  ): boolean | "held" {
    const meta = sandboxMetaOf(request.params) ?? {};
    const agentState = state.agentState(sessionId);
    const wanted: { model?: string; mode?: string } = {};
    for (const key of ["model", "mode"] as const) {
      const value = meta[key];
      if (typeof value === "string" && value !== currentValue(agentState, key)) wanted[key] = value;
    }
    if (Object.keys(wanted).length === 0) return false;
    state.applying.add(sessionId);
    const answer = (reply: Pick<JsonRpcMessage, "result" | "error">) =>
      conn.emit({ jsonrpc: "2.0", id: response.id, ...reply });
    applyToAgent({ conn, state }, sessionId, wanted)
      .then(
        () => answer({ result: withSessionState(response.result, agentState) }),
        (error: unknown) => {
          const e = error instanceof RpcError ? error : new RpcError(-32603, String(error));
          const data = isObject(e.data) ? { ...e.data, sessionId } : { sessionId };
          answer({ error: { code: e.code, message: `${request.method}: ${e.message}`, data } });
          if (CREATES.has(request.method!)) this.discard(conn, state, sessionId);
        },
      )
      .finally(() => state.applying.delete(sessionId))
      // Nothing else awaits this chain: an error here would be an unhandled rejection.
      .catch((error: unknown) =>
        this.logger.error("applying session metadata failed", { sessionId, error: String(error) }),
      );
    return "held";
  }

  /** A session whose creation the server failed: closed at the agent when it can, forgotten here. */
  private discard(conn: ConnectionApi, state: ConnectionState, sessionId: string): void {
    if (state.agentCloses) void conn.request("session/close", { sessionId });
    const record = this.store.get(conn.agentId, sessionId);
    if (record) record.ended = true;
    state.discard(sessionId);
    conn.forgetSession(sessionId);
  }

  agentMessage(message: JsonRpcMessage, conn: ConnectionApi): boolean {
    const sessionId = sessionIdOf(message);
    if (sessionId === undefined) return false;
    const state = this.states.of(conn);
    if (message.method === "session/update") {
      this.countUpdate(conn, state, sessionId, message);
      return state.muted.has(sessionId) || state.applying.has(sessionId);
    }
    if (message.method === "session/request_permission" && kindOf(message) === "request") {
      const id = message.id as JsonRpcId;
      if (state.muted.has(sessionId)) {
        cancelPermissionRequest(conn, id);
        return true;
      }
      state.pendingPermissions.set(idKey(id), { id, sessionId });
    }
    return false;
  }

  agentTextChunk(sessionId: string, conn: ConnectionApi): boolean {
    const state = this.states.of(conn);
    this.countEvent(conn, sessionId);
    // Both are empty while a turn streams: a size check spares two hash lookups per chunk.
    const { muted, applying } = state;
    return (muted.size > 0 && muted.has(sessionId)) || (applying.size > 0 && applying.has(sessionId));
  }

  private countEvent(conn: ConnectionApi, sessionId: string) {
    const record = this.store.touch(conn.agentId, sessionId);
    record.eventCount++;
    return record;
  }

  private countUpdate(
    conn: ConnectionApi,
    state: ConnectionState,
    sessionId: string,
    message: JsonRpcMessage,
  ): void {
    const record = this.countEvent(conn, sessionId);
    const update = isObject(message.params) ? message.params.update : undefined;
    if (!isObject(update)) return;
    state.absorbUpdate(sessionId, update);
    if (update.sessionUpdate === "session_info_update" && typeof update.title === "string")
      record.agentTitle = update.title;
  }

  describeSession(sessionId: string, conn: ConnectionApi): SessionDescription | undefined {
    const record = this.store.get(conn.agentId, sessionId);
    if (record === undefined) return undefined;
    return describeRecord(record, this.states.of(conn));
  }

  /**
   * After a restart the new agent process may not have kept a session's model and mode (an agent
   * that stores sessions may not store those): what the agent reported before the restart is
   * switched to again when its answer to the re-attach shows (or does not show) otherwise. The
   * switches' own updates are absorbed, as at creation; a refused switch is logged, and
   * `list_models` then answers what the agent reports.
   */
  async sessionReattached(sessionId: string, result: unknown, conn: ConnectionApi): Promise<void> {
    const state = this.states.of(conn);
    const before = state.reported(sessionId);
    const answer = new ConnectionState();
    answer.absorb(sessionId, result);
    const wanted: { model?: string; mode?: string } = {};
    for (const key of ["model", "mode"] as const) {
      const value = currentValue(before, key);
      if (value !== null && value !== currentValue(answer.reported(sessionId), key)) wanted[key] = value;
    }
    state.absorb(sessionId, result);
    if (Object.keys(wanted).length > 0) {
      state.applying.add(sessionId);
      try {
        await applyToAgent({ conn, state }, sessionId, wanted);
      } catch (error) {
        this.logger.warn("could not switch a re-attached session back to its model or mode", {
          sessionId,
          wanted,
          error: error instanceof Error ? error.message : String(error),
        });
      } finally {
        state.applying.delete(sessionId);
      }
    }
  }

  connectionClosed(connectionId: string): void {
    this.states.forget(connectionId);
  }

  sessionsEnded(conn: ConnectionApi): void {
    for (const sessionId of conn.sessionIds) {
      const record = this.store.get(conn.agentId, sessionId);
      if (!record) continue;
      record.ended = true;
      this.store.save(record);
    }
  }
}

/** A session/new|load|resume|fork result updated with the model and mode now in force. */
function withSessionState(result: unknown, state: AgentSessionState): unknown {
  if (!isObject(result)) return result;
  const updated: Record<string, unknown> = { ...result };
  if (state.configOptions !== undefined) updated.configOptions = state.configOptions;
  if (isObject(result.models) && state.models)
    updated.models = { ...result.models, currentModelId: listModels(state, undefined).currentModelId };
  if (isObject(result.modes) && state.modes)
    updated.modes = { ...result.modes, currentModeId: currentMode(state) };
  return updated;
}
