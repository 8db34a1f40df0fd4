import {
  client as createClientApp,
  methods,
  type ClientConnection,
  type ClientNotificationMethod,
  type ClientNotificationParamsByMethod,
  type ClientRequestMethod,
  type ClientRequestParamsByMethod,
  type ClientRequestResponsesByMethod,
  type AgentRequestMethod,
  type AgentRequestParamsByMethod,
  type AgentRequestResponsesByMethod,
  type AnyMessage,
  type CancelNotification,
  type InitializeRequest,
  type InitializeResponse,
  type JsonRpcId,
  type MaybePromise,
  type SendRequestOptions,
  RequestError,
} from "@agentclientprotocol/sdk";
// session/fork is not in the SDK's stable surface yet.
import type { ForkSessionRequest, ForkSessionResponse } from "@agentclientprotocol/sdk/unstable";
import { AcpRpcError } from "./errors.js";
import { callSafely } from "./listeners.js";
import { isRequest, paramsSessionId } from "./messages.js";
import type { AcpAttachTarget, AcpEnvelope, AcpHttpStreamOptions } from "./options.js";
import { createAcpHttpStream, type AcpCloseReason, type AcpHttpStream } from "./stream.js";

export interface AcpHttpClientOptions extends Omit<AcpHttpStreamOptions, "onEnvelope"> {
  /** Client name reported to the SDK app. */
  name?: string;
  /** Default per-request timeout (ms); on expiry `$/cancel_request` is sent and the call rejects. */
  requestTimeoutMs?: number;
}

export interface AgentRequestContext {
  method: string;
  requestId: JsonRpcId;
  /** Aborts when the connection closes, or for permission requests when `cancel()` names their session. */
  signal: AbortSignal;
}

/** Answers one agent→client request; throw a `RequestError` to answer with a JSON-RPC error. */
export type AgentRequestHandler<Params, Response> = (
  params: Params,
  context: AgentRequestContext,
) => MaybePromise<Response>;

/** One handler type per ACP client method, so a handler's object literal keeps its literal types. */
type TypedHandlers = {
  [M in ClientRequestMethod]: AgentRequestHandler<
    ClientRequestParamsByMethod[M],
    ClientRequestResponsesByMethod[M]
  >;
};

type Listener<T> = (value: T) => void;
type AnyHandler = AgentRequestHandler<unknown, unknown>;

const CANCELLED_PERMISSION = { outcome: { outcome: "cancelled" } } as const;

/**
 * A typed ACP client over one streamable-HTTP connection: the SDK's `client()`
 * app running on `createAcpHttpStream`.
 */
export class AcpHttpClient {
  readonly stream: AcpHttpStream;
  private readonly connection: ClientConnection;
  private readonly requestTimeoutMs: number | undefined;
  private readonly requestHandlers = new Map<string, AnyHandler>();
  private readonly notificationListeners = new Map<string, Set<Listener<unknown>>>();
  private readonly envelopeListeners = new Set<Listener<AcpEnvelope>>();
  /** In-flight permission requests per session, aborted by `cancel()`. */
  private readonly permissionAborts = new Map<string, Set<AbortController>>();
  private initializeResultValue: InitializeResponse | undefined;

  constructor(options: AcpHttpClientOptions) {
    const { name, requestTimeoutMs, ...streamOptions } = options;
    this.requestTimeoutMs = requestTimeoutMs;
    this.stream = createAcpHttpStream({ ...streamOptions, onEnvelope: (envelope) => this.observe(envelope) });
    const app = createClientApp({ name: name ?? "acp-http-client" })
      .onRequest("*", (context) =>
        this.dispatchRequest(context.method, context.params, context.requestId, context.signal),
      )
      // Notifications are dispatched in wire order from the transport (see observe()).
      .onNotification("*", () => undefined);
    this.connection = app.connect(this.stream);
  }

  /** The server's connection id, once initialized. */
  get connectionId(): string | undefined {
    return this.stream.connectionId;
  }

  /** The agent's `initialize` answer (capabilities, auth methods, agent info). */
  get initializeResult(): InitializeResponse | undefined {
    return this.initializeResultValue;
  }

  /** Resolves with the reason once the connection is finished. */
  get closed(): Promise<AcpCloseReason> {
    return this.stream.closed;
  }

  onClose(listener: Listener<AcpCloseReason>): void {
    void this.stream.closed.then((reason) => callSafely(listener, reason));
  }

  /** Observes every JSON-RPC envelope in both directions, in wire order. Returns an unsubscribe function. */
  onEnvelope(listener: Listener<AcpEnvelope>): () => void {
    this.envelopeListeners.add(listener);
    return () => this.envelopeListeners.delete(listener);
  }

  /** Registers the handler for an agent→client request (one per method). Unhandled methods get -32601. */
  onRequest<M extends ClientRequestMethod>(method: M, handler: TypedHandlers[M]): () => void;
  onRequest(method: string, handler: AgentRequestHandler<unknown, unknown>): () => void;
  onRequest(method: string, handler: AnyHandler): () => void {
    this.requestHandlers.set(method, handler);
    return () => {
      if (this.requestHandlers.get(method) === handler) this.requestHandlers.delete(method);
    };
  }

  /** Listens to an agent notification (e.g. `session/update`, extension notifications), in wire order. */
  onNotification<M extends ClientNotificationMethod>(
    method: M,
    listener: Listener<ClientNotificationParamsByMethod[M]>,
  ): () => void;
  onNotification(method: string, listener: Listener<unknown>): () => void;
  onNotification(method: string, listener: Listener<unknown>): () => void {
    let set = this.notificationListeners.get(method);
    if (!set) this.notificationListeners.set(method, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  /**
   * Instead of `initialize`: continues a connection another client opened, its events after
   * `target.lastEventId` (see `AcpHttpStream.attach`). `initializeResult` stays undefined.
   */
  attach(target: AcpAttachTarget): Promise<void> {
    return this.stream.attach(target);
  }

  async initialize(params: InitializeRequest, options?: SendRequestOptions): Promise<InitializeResponse> {
    const result = await this.request(methods.agent.initialize, params, options);
    this.initializeResultValue = result;
    return result;
  }

  newSession(
    params: AgentRequestParamsByMethod["session/new"],
    options?: SendRequestOptions,
  ): Promise<AgentRequestResponsesByMethod["session/new"]> {
    return this.request(methods.agent.session.new, params, options);
  }

  loadSession(
    params: AgentRequestParamsByMethod["session/load"],
    options?: SendRequestOptions,
  ): Promise<AgentRequestResponsesByMethod["session/load"]> {
    return this.request(methods.agent.session.load, params, options);
  }

  prompt(
    params: AgentRequestParamsByMethod["session/prompt"],
    options?: SendRequestOptions,
  ): Promise<AgentRequestResponsesByMethod["session/prompt"]> {
    return this.request(methods.agent.session.prompt, params, options);
  }

  setSessionMode(
    params: AgentRequestParamsByMethod["session/set_mode"],
    options?: SendRequestOptions,
  ): Promise<AgentRequestResponsesByMethod["session/set_mode"]> {
    return this.request(methods.agent.session.setMode, params, options);
  }

  setSessionConfigOption(
    params: AgentRequestParamsByMethod["session/set_config_option"],
    options?: SendRequestOptions,
  ): Promise<AgentRequestResponsesByMethod["session/set_config_option"]> {
    return this.request(methods.agent.session.setConfigOption, params, options);
  }

  listSessions(
    params: AgentRequestParamsByMethod["session/list"] = {},
    options?: SendRequestOptions,
  ): Promise<AgentRequestResponsesByMethod["session/list"]> {
    return this.request(methods.agent.session.list, params, options);
  }

  resumeSession(
    params: AgentRequestParamsByMethod["session/resume"],
    options?: SendRequestOptions,
  ): Promise<AgentRequestResponsesByMethod["session/resume"]> {
    return this.request(methods.agent.session.resume, params, options);
  }

  forkSession(params: ForkSessionRequest, options?: SendRequestOptions): Promise<ForkSessionResponse> {
    return this.extMethod<ForkSessionResponse>("session/fork", params, options);
  }

  /** Sends `session/cancel` and answers that session's pending permission requests with `cancelled`. */
  async cancel(params: CancelNotification): Promise<void> {
    for (const controller of this.permissionAborts.get(params.sessionId) ?? []) controller.abort();
    await this.notify(methods.agent.session.cancel, params);
  }

  /** Any request by method name (extension methods, methods newer than this package). */
  extMethod<Response = unknown>(
    method: string,
    params?: unknown,
    options?: SendRequestOptions,
  ): Promise<Response> {
    return this.call(method, () =>
      this.connection.agent.request<Response>(method, params, this.withTimeout(options)),
    );
  }

  /** Any notification by method name. */
  extNotification(method: string, params?: unknown): Promise<void> {
    return this.notify(method, params);
  }

  /** Ends the connection (DELETE) and rejects whatever is still pending. */
  async close(): Promise<void> {
    await this.stream.close();
    this.connection.close();
  }

  /** Stops following the connection without ending it: another client may `attach` to it. */
  async detach(): Promise<void> {
    await this.stream.detach();
    this.connection.close();
  }

  private request<M extends AgentRequestMethod>(
    method: M,
    params: AgentRequestParamsByMethod[M],
    options: SendRequestOptions | undefined,
  ): Promise<AgentRequestResponsesByMethod[M]> {
    return this.call(method, () => this.connection.agent.request(method, params, this.withTimeout(options)));
  }

  private notify(method: string, params: unknown): Promise<void> {
    return this.call(method, () => this.connection.agent.notify(method, params));
  }

  private async call<T>(method: string, send: () => Promise<T>): Promise<T> {
    try {
      return await send();
    } catch (error) {
      // A transport failure explains an SDK "connection closed" rejection better.
      throw this.stream.error ?? AcpRpcError.from(method, error);
    }
  }

  private withTimeout(options: SendRequestOptions | undefined): SendRequestOptions | undefined {
    if (this.requestTimeoutMs === undefined || options?.cancellationSignal) return options;
    return {
      ...options,
      cancellationSignal: AbortSignal.timeout(this.requestTimeoutMs),
      stopWaitingOnCancel: true,
    };
  }

  private observe(envelope: AcpEnvelope): void {
    for (const listener of this.envelopeListeners) callSafely(listener, envelope);
    const message: AnyMessage = envelope.message;
    if (envelope.direction !== "inbound" || !("method" in message) || isRequest(message)) return;
    for (const listener of this.notificationListeners.get(message.method) ?? [])
      callSafely(listener, message.params);
  }

  private async dispatchRequest(
    method: string,
    params: unknown,
    requestId: JsonRpcId,
    signal: AbortSignal,
  ): Promise<unknown> {
    const handler = this.requestHandlers.get(method);
    if (!handler) throw RequestError.methodNotFound(method);
    if (method !== methods.client.session.requestPermission)
      return handler(params, { method, requestId, signal });
    return this.dispatchPermission(handler, params, requestId, signal);
  }

  /** Permission requests must be answered `cancelled` once their turn is cancelled (ACP prompt-turn rules). */
  private async dispatchPermission(
    handler: AnyHandler,
    params: unknown,
    requestId: JsonRpcId,
    signal: AbortSignal,
  ): Promise<unknown> {
    const sessionId = paramsSessionId({ jsonrpc: "2.0", method: "", params });
    const controller = new AbortController();
    const onAbort = (): void => controller.abort();
    signal.addEventListener("abort", onAbort, { once: true });
    const set = sessionId === undefined ? undefined : this.track(sessionId, controller);
    try {
      const cancelled = new Promise<typeof CANCELLED_PERMISSION>((resolve) =>
        controller.signal.addEventListener("abort", () => resolve(CANCELLED_PERMISSION), { once: true }),
      );
      const context = {
        method: methods.client.session.requestPermission,
        requestId,
        signal: controller.signal,
      };
      return await Promise.race([handler(params, context), cancelled]);
    } finally {
      signal.removeEventListener("abort", onAbort);
      set?.delete(controller);
      if (sessionId !== undefined && set?.size === 0) this.permissionAborts.delete(sessionId);
    }
  }

  private track(sessionId: string, controller: AbortController): Set<AbortController> {
    let set = this.permissionAborts.get(sessionId);
    if (!set) this.permissionAborts.set(sessionId, (set = new Set()));
    set.add(controller);
    return set;
  }
}
