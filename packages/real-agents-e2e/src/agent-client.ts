import {
  client,
  type ClientContext,
  type InitializeResponse,
  type PermissionOption,
  type RequestPermissionRequest,
  type RequestPermissionResponse,
  type SessionNotification,
  type StopReason,
} from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";

export type PermissionPolicy = "allow" | "reject";

export interface OpenOptions {
  baseUrl: string;
  agent: string;
  /** Sent as `_meta["sandboxagent.dev"].env`: per-request variables for the agent. */
  env?: Record<string, string>;
  headers?: Record<string, string>;
}

export interface TurnResult {
  stopReason: StopReason;
  /** The concatenated `agent_message_chunk` text of this turn. */
  text: string;
  updates: SessionNotification[];
  permissions: RequestPermissionRequest[];
}

const UPDATE_WAIT_MS = 30_000;

/**
 * One ACP connection to a real agent through the server's HTTP transport, with the SDK client.
 * It records every `session/update` and answers permission requests by the current policy.
 */
export class AgentClient {
  readonly updates: SessionNotification[] = [];
  readonly permissions: RequestPermissionRequest[] = [];
  permissionPolicy: PermissionPolicy = "allow";
  private readonly waiters = new Set<() => void>();

  // Set by `open` once the connection is initialized; the handlers above need the instance before that.
  ctx!: ClientContext;
  initialize!: InitializeResponse;
  private closeConnection: () => void = () => undefined;

  private constructor() {}

  static async open(options: OpenOptions): Promise<AgentClient> {
    const self = new AgentClient();
    const app = client({ name: "real-agents-e2e" })
      .onNotification("session/update", ({ params }) => self.record(params))
      .onRequest("session/request_permission", ({ params }) => self.answerPermission(params));
    const connection = app.connect(
      createHttpStream(`${options.baseUrl}/v2/rpc`, { headers: options.headers }),
    );
    self.closeConnection = () => connection.close();
    self.ctx = connection.agent;
    self.initialize = await connection.agent.request("initialize", {
      protocolVersion: 1,
      clientCapabilities: {},
      _meta: { "sandboxagent.dev": { agent: options.agent, ...(options.env ? { env: options.env } : {}) } },
    });
    return self;
  }

  close(): void {
    this.closeConnection();
  }

  /** Resolves when an update matching `predicate` has arrived (looking at those already here too). */
  async waitForUpdate(
    predicate: (u: SessionNotification) => boolean,
    timeoutMs = UPDATE_WAIT_MS,
  ): Promise<SessionNotification> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.updates.find(predicate);
      if (found) return found;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no matching session/update within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, left);
        this.waiters.add(wake);
      });
    }
  }

  /** Sends one text prompt and collects what the turn produced. */
  async prompt(sessionId: string, text: string): Promise<TurnResult> {
    const firstUpdate = this.updates.length;
    const firstPermission = this.permissions.length;
    const result = await this.ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
    const updates = this.updates.slice(firstUpdate).filter((u) => u.sessionId === sessionId);
    return {
      stopReason: result.stopReason,
      text: messageText(updates),
      updates,
      permissions: this.permissions.slice(firstPermission),
    };
  }

  private record(update: SessionNotification): void {
    this.updates.push(update);
    [...this.waiters].forEach((wake) => wake());
  }

  private answerPermission(params: RequestPermissionRequest): RequestPermissionResponse {
    this.permissions.push(params);
    const kinds: PermissionOption["kind"][] =
      this.permissionPolicy === "allow" ? ["allow_once", "allow_always"] : ["reject_once", "reject_always"];
    const option = kinds.map((k) => params.options.find((o) => o.kind === k)).find((o) => o !== undefined);
    return option
      ? { outcome: { outcome: "selected", optionId: option.optionId } }
      : { outcome: { outcome: "cancelled" } };
  }
}

export function messageText(updates: SessionNotification[]): string {
  return updates
    .map((u) => u.update)
    .map((u) =>
      u.sessionUpdate === "agent_message_chunk" && u.content.type === "text" ? u.content.text : "",
    )
    .join("");
}
