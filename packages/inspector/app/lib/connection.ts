/**
 * One agent connection of this page: a `SandboxAgentClient` whose raw JSON-RPC traffic is kept (the
 * raw view) and folded into per-session timelines (the conversation view). Permission requests wait
 * for a button in the page.
 */
import type { AnyMessage, ContentBlock, StopReason } from "@agentclientprotocol/sdk";
import {
  SandboxAgentClient,
  type AcpEnvelope,
  type AgentInfo,
  type ModelList,
  type PermissionDecision,
  type PermissionRequest,
  type SessionSummary,
} from "sandbox-agent";
import { errorMessage } from "./format.js";
import { Observable } from "./observable.js";
import type { ServerModel } from "./server.js";
import { Timeline, type PermissionAnswer } from "./timeline.js";
import type { Transport } from "./transport.js";

export interface RawEnvelope {
  seq: number;
  direction: AcpEnvelope["direction"];
  message: AnyMessage;
  eventId?: string;
  sessionId?: string;
  at: number;
}

export type ConnectionState = "connecting" | "open" | "closed" | "failed";

interface PendingRequest {
  method: string;
  sessionId?: string;
}

interface PermissionWaiter {
  sessionId: string;
  toolCallId: string;
  requestKey: string;
  resolve?: (decision: PermissionDecision) => void;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function idKey(id: unknown): string {
  return `${typeof id}:${String(id)}`;
}

function sessionIdOf(value: unknown): string | undefined {
  return isRecord(value) && typeof value.sessionId === "string" ? value.sessionId : undefined;
}

const CLOSE_REASONS = {
  disconnect: "disconnected",
  agentExited: "the agent process exited",
  error: "connection lost",
};

let nextConnection = 1;

export class ConnectionModel extends Observable {
  readonly key = nextConnection++;
  readonly client: SandboxAgentClient;
  state: ConnectionState = "connecting";
  /** Why the connection closed or failed. */
  reason?: string;
  readonly envelopes: RawEnvelope[] = [];
  readonly timelines = new Map<string, Timeline>();
  /** The agent's `session/list`, with sandbox metadata. */
  listed: SessionSummary[] = [];
  /** Models per session, when the agent has a choice. */
  readonly models = new Map<string, ModelList>();
  private readonly pending = new Map<string, PendingRequest>();
  private readonly permissions: PermissionWaiter[] = [];
  /** Session of each permission request seen, by request key, to show its answer. */
  private readonly permissionSessions = new Map<string, string>();

  /** How this connection travels (an attached one always over HTTP: see the constructor). */
  readonly transport: Transport;

  /**
   * `attach`: the id of a connection another client opened, to continue instead of starting an
   * agent. Attaching takes over another client's stream, which only the HTTP transport can do (a
   * WebSocket resumes only its own connection), so an attached connection ignores `transport`.
   */
  constructor(
    readonly server: ServerModel,
    readonly agentId: string,
    transport: Transport,
    readonly attached?: string,
  ) {
    super();
    this.transport = attached === undefined ? transport : "http";
    this.client = new SandboxAgentClient({
      baseUrl: server.baseUrl,
      token: server.token,
      agent: agentId,
      autoConnect: false,
      transport: this.transport,
      ...(attached !== undefined ? { attach: attached } : {}),
      onEnvelope: (envelope) => this.observe(envelope),
      onPermissionRequest: (request, { signal }) => this.waitForAnswer(request, signal),
    });
    this.client.on("disconnected", (event) => {
      if (this.state === "failed") return;
      this.state = "closed";
      this.reason = event.error ? errorMessage(event.error) : CLOSE_REASONS[event.reason];
      this.changed();
      void this.server.refreshHealth();
    });
    void this.client.connect().then(
      () => {
        this.state = "open";
        this.changed();
        void this.server.refreshHealth();
        void this.refreshSessions();
      },
      (error: unknown) => {
        this.state = "failed";
        this.reason = errorMessage(error);
        this.changed();
      },
    );
  }

  /** The title set here or by the agent, else the one the agent's list has. */
  titleOf(sessionId: string): string | undefined {
    return this.timelines.get(sessionId)?.title ?? this.listed.find((s) => s.sessionId === sessionId)?.title;
  }

  get info(): AgentInfo | undefined {
    return this.client.agentInfo;
  }

  timeline(sessionId: string): Timeline {
    let timeline = this.timelines.get(sessionId);
    if (!timeline) this.timelines.set(sessionId, (timeline = new Timeline()));
    return timeline;
  }

  async refreshSessions(): Promise<void> {
    if (this.state !== "open") return;
    try {
      this.listed = (await this.client.listSessions()).sessions;
      this.changed();
    } catch {
      // Listing is a convenience: the sessions this page opened are shown anyway.
    }
  }

  async newSession(cwd: string, title?: string): Promise<string> {
    const state = await this.client.newSession({ cwd, ...(title ? { metadata: { title } } : {}) });
    this.adopt(state.sessionId, state);
    return state.sessionId;
  }

  /** Re-opens a listed session here; its history is replayed into the timeline. */
  async loadSession(summary: SessionSummary): Promise<void> {
    const timeline = this.timeline(summary.sessionId);
    if (summary.title) timeline.title = summary.title;
    const state = await this.client.loadSession({ sessionId: summary.sessionId, cwd: summary.cwd });
    this.adopt(summary.sessionId, state);
  }

  prompt(sessionId: string, text: string): void {
    // The outcome (stop reason or error) is rendered from the response on the stream.
    this.client.prompt({ sessionId, prompt: text }).then(
      () => void this.refreshSessions(),
      () => void this.refreshSessions(),
    );
  }

  cancel(sessionId: string): Promise<void> {
    return this.client.cancel({ sessionId });
  }

  async setMode(sessionId: string, modeId: string): Promise<void> {
    await this.client.setSessionMode({ sessionId, modeId });
  }

  async setConfigOption(sessionId: string, configId: string, value: string | boolean): Promise<void> {
    const { configOptions } = await this.client.setSessionConfigOption({ sessionId, configId, value });
    this.timeline(sessionId).configOptions = configOptions;
    this.changed();
  }

  async setModel(sessionId: string, modelId: string): Promise<void> {
    await this.client.setSessionModel({ sessionId, modelId });
    await this.loadModels(sessionId);
  }

  async rename(sessionId: string, title: string): Promise<void> {
    await this.client.setMetadata({ sessionId, metadata: { title } });
    this.timeline(sessionId).title = title;
    this.changed();
    void this.refreshSessions();
  }

  /** Answers a permission request shown in the page. */
  answer(requestKey: string, answer: PermissionAnswer): void {
    const waiter = this.permissions.find((p) => p.requestKey === requestKey);
    waiter?.resolve?.(answer);
  }

  disconnect(): Promise<void> {
    return this.client.disconnect();
  }

  private adopt(
    sessionId: string,
    state: {
      modes?: Timeline["modes"];
      configOptions?: Timeline["configOptions"];
      metadata: Record<string, unknown>;
    },
  ): void {
    const timeline = this.timeline(sessionId);
    if (state.modes) timeline.modes = state.modes;
    if (state.configOptions) timeline.configOptions = state.configOptions;
    if (typeof state.metadata.title === "string") timeline.title = state.metadata.title;
    this.changed();
    void this.loadModels(sessionId);
    void this.refreshSessions();
  }

  private async loadModels(sessionId: string): Promise<void> {
    if (!this.info?.features.sessionListModels) return;
    try {
      this.models.set(sessionId, await this.client.listModels({ sessionId }));
      this.changed();
    } catch {
      // The model picker is hidden for agents without a model list.
    }
  }

  private async waitForAnswer(request: PermissionRequest, signal: AbortSignal): Promise<PermissionDecision> {
    const waiter = this.permissions.find(
      (p) => !p.resolve && p.sessionId === request.sessionId && p.toolCallId === request.toolCall.toolCallId,
    );
    if (!waiter) return { outcome: "cancelled" };
    try {
      return await new Promise<PermissionDecision>((resolve) => {
        waiter.resolve = resolve;
        signal.addEventListener("abort", () => resolve({ outcome: "cancelled" }), { once: true });
      });
    } finally {
      this.permissions.splice(this.permissions.indexOf(waiter), 1);
    }
  }

  /** Every message, both ways, in wire order: kept for the raw view and folded into timelines. */
  private observe(envelope: AcpEnvelope): void {
    const message = envelope.message;
    const sessionId = this.sessionOf(message);
    this.envelopes.push({
      seq: this.envelopes.length + 1,
      direction: envelope.direction,
      message,
      ...(envelope.eventId !== undefined ? { eventId: envelope.eventId } : {}),
      ...(sessionId !== undefined ? { sessionId } : {}),
      at: Date.now(),
    });
    if (envelope.direction === "outbound") this.outbound(message, sessionId);
    else this.inbound(message, sessionId);
    this.changed();
  }

  private sessionOf(message: AnyMessage): string | undefined {
    if ("method" in message) return sessionIdOf(message.params);
    if ("result" in message)
      return sessionIdOf(message.result) ?? this.pending.get(idKey(message.id))?.sessionId;
    return "id" in message ? this.pending.get(idKey(message.id))?.sessionId : undefined;
  }

  private outbound(message: AnyMessage, sessionId: string | undefined): void {
    if ("method" in message) {
      if ("id" in message && message.id != null)
        this.pending.set(idKey(message.id), { method: message.method, ...(sessionId ? { sessionId } : {}) });
      if (message.method === "session/prompt" && sessionId && isRecord(message.params))
        this.timeline(sessionId).userPrompt((message.params.prompt ?? []) as ContentBlock[]);
      return;
    }
    // Our answer to an agent request: a permission decision.
    const requestKey = idKey(message.id);
    const permissionSession = this.permissionSessions.get(requestKey);
    const outcome = "result" in message && isRecord(message.result) ? message.result.outcome : undefined;
    if (permissionSession && isRecord(outcome)) {
      this.permissionSessions.delete(requestKey);
      this.timeline(permissionSession).permissionAnswered(requestKey, outcome as PermissionAnswer);
    }
  }

  private inbound(message: AnyMessage, sessionId: string | undefined): void {
    if (!("method" in message)) return this.response(message);
    const params = isRecord(message.params) ? message.params : {};
    if ("id" in message && message.id != null) {
      if (message.method === "session/request_permission" && sessionId) {
        const toolCall = params.toolCall as PermissionRequest["toolCall"];
        const requestKey = idKey(message.id);
        this.permissions.push({ sessionId, toolCallId: toolCall.toolCallId, requestKey });
        this.permissionSessions.set(requestKey, sessionId);
        this.timeline(sessionId).permissionAsked(
          requestKey,
          toolCall,
          params.options as PermissionRequest["options"],
        );
      }
      return;
    }
    if (message.method === "session/update" && sessionId)
      this.timeline(sessionId).apply(params.update as Parameters<Timeline["apply"]>[0]);
    else if (message.method === "_sandboxagent/session/ended") this.ended(sessionId, params);
  }

  private response(message: AnyMessage): void {
    if (!("id" in message)) return;
    const request = this.pending.get(idKey(message.id));
    this.pending.delete(idKey(message.id));
    if (!request?.sessionId) return;
    const timeline = this.timeline(request.sessionId);
    if ("error" in message && message.error) {
      const data = isRecord(message.error.data) ? message.error.data : {};
      const stderr = typeof data.stderrTail === "string" ? data.stderrTail : undefined;
      timeline.error(`${request.method} failed (${message.error.code})`, message.error.message, stderr);
    } else if (request.method === "session/prompt" && "result" in message && isRecord(message.result)) {
      timeline.turnEnded(message.result.stopReason as StopReason);
    }
  }

  private ended(sessionId: string | undefined, params: Record<string, unknown>): void {
    const targets = sessionId ? [this.timeline(sessionId)] : [...this.timelines.values()];
    for (const timeline of targets) {
      timeline.sessionEnded(
        typeof params.reason === "string" ? params.reason : "unknown",
        typeof params.exitCode === "number" ? params.exitCode : null,
        typeof params.signal === "string" ? params.signal : null,
        typeof params.stderrTail === "string" ? params.stderrTail : "",
      );
    }
  }
}
