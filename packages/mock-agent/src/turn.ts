import type { AgentContext, ContentBlock, SessionUpdate, StopReason } from "@agentclientprotocol/sdk";
import type { Usage } from "@agentclientprotocol/sdk/unstable";
import { flushStdout, writeStdout } from "./io.js";
import { notification, updateLines, type StoredSession } from "./session.js";
import type { AgentState } from "./state.js";

/** Thrown inside a turn to end it with a stop reason (`stop`, cancellation). */
export class TurnStop extends Error {
  constructor(readonly reason: StopReason) {
    super(`turn stopped: ${reason}`);
  }
}

/** One running `session/prompt`: emits updates in order, records them, and observes cancellation. */
export class Turn {
  private lastSend: Promise<void> = Promise.resolve();
  private toolCounter = 0;
  /** Reported as the turn's `PromptResponse.usage` when set (`turn-usage`). */
  usage: Usage | undefined;

  constructor(
    readonly state: AgentState,
    readonly session: StoredSession,
    readonly client: AgentContext,
    readonly signal: AbortSignal,
    readonly prompt: ContentBlock[],
    readonly meta: Record<string, unknown> | null | undefined,
  ) {}

  get sessionId(): string {
    return this.session.sessionId;
  }

  /** Sends and records an update, resolving once it is written (order is preserved). */
  emit(update: SessionUpdate): Promise<void> {
    this.session.history.push(update);
    this.lastSend = this.client.notify("session/update", notification(this.sessionId, update));
    return this.lastSend;
  }

  message(text: string): Promise<void> {
    return this.emit({ sessionUpdate: "agent_message_chunk", content: { type: "text", text } });
  }

  /** Waits until everything sent so far is written to stdout and handed to the OS. */
  async flush(): Promise<void> {
    await this.lastSend;
    await flushStdout();
  }

  /** Records updates and writes them as raw lines in one write, after everything sent so far. */
  async emitBatch(updates: readonly SessionUpdate[]): Promise<void> {
    this.session.history.push(...updates);
    await this.lastSend;
    await writeStdout(updateLines(this.sessionId, updates));
  }

  /** Writes a raw stdout line after everything sent so far (never inside another message). */
  async raw(line: string): Promise<void> {
    await this.lastSend;
    await writeStdout(line + "\n");
  }

  nextToolCallId(): string {
    return `mock-tool-${Date.now().toString(36)}-${++this.toolCounter}`;
  }

  /** Throws TurnStop("cancelled") if the client cancelled this turn. */
  checkCancelled(): void {
    if (this.signal.aborted) throw new TurnStop("cancelled");
  }

  /** Resolves after `ms`, or throws TurnStop("cancelled") as soon as the turn is cancelled. */
  sleep(ms: number): Promise<void> {
    return this.untilCancelled(new Promise((resolve) => setTimeout(resolve, ms).unref()));
  }

  /** Races `work` against cancellation. */
  untilCancelled<T>(work: Promise<T>): Promise<T> {
    this.checkCancelled();
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => reject(new TurnStop("cancelled"));
      this.signal.addEventListener("abort", onAbort, { once: true });
      work.then(resolve, reject).finally(() => this.signal.removeEventListener("abort", onAbort));
    });
  }
}
