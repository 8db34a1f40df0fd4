import type { ContentBlock, RequestPermissionRequest, SessionUpdate } from "@agentclientprotocol/sdk";
// The draft schema's PromptResponse: it has the turn's `usage`.
import type { PromptResponse } from "@agentclientprotocol/sdk/unstable";
import type { AgentLink, TurnSink } from "./agent-link.js";
import { describeDeath } from "./agent-link.js";
import { AcpHarnessError, errorMessage } from "./errors.js";
import type { AcpEventMapper } from "./events.js";
import type { BridgedToolCall } from "./mcp-bridge.js";
import { CANCELLED, type PermissionOutcome } from "./permissions.js";

export type TurnItem =
  | { kind: "update"; update: SessionUpdate }
  | {
      kind: "permission";
      request: RequestPermissionRequest;
      signal: AbortSignal;
      resolve: (o: PermissionOutcome) => void;
    }
  | { kind: "tool"; call: BridgedToolCall }
  | { kind: "done"; response: PromptResponse }
  | { kind: "failed"; error: AcpHarnessError };

/** A permission request waiting for the client, keyed by the approval id the client answers. */
export interface HeldPermission {
  approvalId: string;
  request: RequestPermissionRequest;
  resolve: (o: PermissionOutcome) => void;
}

/**
 * One `session/prompt` in flight. It can outlive a single `chatStream` call:
 * when it pauses for an approval or a bridged tool result, the turn stays in
 * the session pool and the next `chat()` on the thread continues it.
 */
export class Turn implements TurnSink {
  private readonly items: TurnItem[] = [];
  private waiter: (() => void) | undefined;
  readonly heldPermissions = new Map<string, HeldPermission>();
  readonly heldTools = new Map<string, BridgedToolCall>();
  readonly deadline: number;
  finished = false;
  cancelSent = false;

  constructor(
    private readonly link: AgentLink,
    readonly sessionId: string,
    readonly mapper: AcpEventMapper,
    turnTimeoutMs: number,
  ) {
    this.deadline = Date.now() + turnTimeoutMs;
  }

  start(prompt: ContentBlock[]): void {
    this.link.attach(this.sessionId, this);
    this.link
      .untilDeath(
        this.link.agent.request("session/prompt", { sessionId: this.sessionId, prompt }),
        "the turn",
      )
      .then(
        (response) => this.push({ kind: "done", response }),
        async (err: unknown) => {
          // The connection can close a moment before the exit status is known.
          await Promise.race([this.link.death, new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
          this.push({ kind: "failed", error: toHarnessError(err, this.link) });
        },
      );
  }

  onUpdate(update: SessionUpdate): void {
    this.push({ kind: "update", update });
  }

  onPermission(request: RequestPermissionRequest, signal: AbortSignal): Promise<PermissionOutcome> {
    return new Promise((resolve) => {
      signal.addEventListener("abort", () => resolve(CANCELLED), { once: true });
      this.push({ kind: "permission", request, signal, resolve });
    });
  }

  onToolCall(call: BridgedToolCall): void {
    this.push({ kind: "tool", call });
  }

  /** Next item, or undefined when `signal` aborts or `until` passes first. */
  async next(signal: AbortSignal | undefined, until: number): Promise<TurnItem | "aborted" | "timeout"> {
    for (;;) {
      // An abort wins over queued output; whatever is queued is read while the turn winds down.
      if (signal?.aborted) return "aborted";
      const item = this.items.shift();
      if (item) return item;
      const remaining = until - Date.now();
      if (remaining <= 0) return "timeout";
      const outcome = await new Promise<"wake" | "aborted" | "timeout">((resolve) => {
        const timer = setTimeout(() => resolve("timeout"), remaining);
        timer.unref();
        const onAbort = (): void => resolve("aborted");
        signal?.addEventListener("abort", onAbort, { once: true });
        this.waiter = () => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          resolve("wake");
        };
      });
      this.waiter = undefined;
      if (outcome !== "wake" && this.items.length === 0) return outcome;
    }
  }

  /** Items already queued, without waiting (to batch concurrent tool calls). */
  drainQueued<K extends TurnItem["kind"]>(kind: K): Array<Extract<TurnItem, { kind: K }>> {
    const taken: Array<Extract<TurnItem, { kind: K }>> = [];
    for (let i = 0; i < this.items.length;) {
      const item = this.items[i];
      if (item?.kind === kind) {
        taken.push(item as Extract<TurnItem, { kind: K }>);
        this.items.splice(i, 1);
      } else i++;
    }
    return taken;
  }

  /** ACP cancel: notify the agent, then answer everything we hold with "cancelled". */
  async cancel(): Promise<void> {
    if (this.cancelSent || this.finished) return;
    this.cancelSent = true;
    // Cancel first: an agent that sees a permission answer before the cancel would carry on.
    await this.link.agent.notify("session/cancel", { sessionId: this.sessionId }).catch(() => undefined);
    for (const held of this.heldPermissions.values()) held.resolve(CANCELLED);
    this.heldPermissions.clear();
    for (const item of this.drainQueued("permission")) item.resolve(CANCELLED);
    for (const call of this.heldTools.values()) call.fail("The turn was cancelled");
    this.heldTools.clear();
  }

  finish(): void {
    this.finished = true;
    this.link.detach(this.sessionId);
  }

  private push(item: TurnItem): void {
    this.items.push(item);
    this.waiter?.();
  }
}

function toHarnessError(err: unknown, link: AgentLink): AcpHarnessError {
  if (err instanceof AcpHarnessError) return err;
  const death = link.dead;
  if (death)
    return new AcpHarnessError("agent_exited", `agent exited during the turn${describeDeath(death)}`);
  return new AcpHarnessError(
    "prompt_failed",
    `session/prompt failed: ${errorMessage(err)}${link.stderrSuffix()}`,
  );
}
