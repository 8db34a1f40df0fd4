import { randomUUID } from "node:crypto";
import type { PromptResponse } from "@agentclientprotocol/sdk/unstable";
import { getSandbox, snapshotFiles, diffSnapshots, type SandboxInstance } from "@sandbox-agent/ai-sandbox";
import {
  EventType,
  type AdapterYieldChunk,
  type JSONSchema,
  type ModelMessage,
  type TextOptions,
} from "@tanstack/ai";
import { DEFAULTS, type AcpCompatibleConfig, type AcpModelOptions } from "./config.js";
import { AcpHarnessError, errorMessage } from "./errors.js";
import { AcpEventMapper, custom } from "./events.js";
import type { BridgeTool, BridgedToolCall } from "./mcp-bridge.js";
import {
  allowOutcome,
  CANCELLED,
  decideByMode,
  outcomeForApproval,
  rejectOutcome,
  type PermissionOutcome,
} from "./permissions.js";
import { defaultBuildPrompt, fitToCapabilities, toBlocks } from "./prompt.js";
import { SessionPool, type WarmSession } from "./session-pool.js";
import { acquireSession } from "./session-setup.js";
import { finishStructuredTurn, releaseTexts, type RunIds } from "./structured-output.js";
import { Turn, type TurnItem } from "./turn.js";
import { turnUsage } from "./usage.js";

type AnyConfig = AcpCompatibleConfig<ReadonlyArray<string>, object>;
type Options<TOptions extends object> = TextOptions<AcpModelOptions<TOptions>>;
type Chunks = AsyncGenerator<AdapterYieldChunk, void, undefined>;

/** Everything one `chatStream` call needs while it drives a turn. */
interface RunContext<TOptions extends object> {
  ids: RunIds;
  options: Options<TOptions>;
  sandbox: SandboxInstance;
  signal: AbortSignal | undefined;
}

/** Per-turn data that survives across the `chatStream` calls of one paused turn. */
interface TurnState {
  outputSchema: JSONSchema | undefined;
  snapshot: Awaited<ReturnType<typeof snapshotFiles>> | undefined;
}

/**
 * Runs chat turns against ACP agents. One runner per `acpCompatible()` config;
 * it owns the pool of warm agent sessions.
 */
export class HarnessRunner {
  readonly pool = new SessionPool();
  private readonly turnState = new WeakMap<Turn, TurnState>();

  constructor(private readonly config: AnyConfig) {}

  async *run<TOptions extends object>(model: string, options: Options<TOptions>): Chunks {
    // The engine's middleware context carries the ids of the whole chat() call, which
    // spans several chatStream calls when a turn pauses for tools.
    const engine = options.capabilities as { runId?: unknown; threadId?: unknown } | undefined;
    const ids: RunIds = {
      model,
      threadId: options.threadId ?? stringOr(engine?.threadId, createId("thread")),
      runId: options.runId ?? stringOr(engine?.runId, createId("run")),
    };
    yield { type: EventType.RUN_STARTED, threadId: ids.threadId, runId: ids.runId, timestamp: Date.now() };
    let session: WarmSession | undefined;
    let paused = false;
    try {
      const sandbox = sandboxOf(options, this.config.name);
      const ctx: RunContext<TOptions> = { ids, options, sandbox, signal: signalOf(options) };
      const acquired = await acquireSession(this.config, this.pool, {
        key: [this.config.name, sandbox.id, ids.threadId, model].join("\u0000"),
        threadId: ids.threadId,
        model,
        sandbox,
        modelOptions: options.modelOptions,
        tools: bridgeTools(options),
        signal: ctx.signal ?? new AbortController().signal,
        createId,
      });
      session = acquired.session;
      for (const message of acquired.warnings) yield custom(`${this.config.name}.warning`, { message });
      yield custom(`${this.config.name}.session-id`, { sessionId: session.sessionId });
      const turn =
        (await this.continueHeld(session, options)) ?? (await this.startTurn(session, ctx, acquired.resumed));
      paused = yield* this.drive(session, turn, ctx);
    } catch (err) {
      yield runError(err);
      if (session?.link.dead) await this.pool.evict(session);
      else if (session) this.pool.release(session, this.config.keepWarmMs ?? DEFAULTS.keepWarmMs);
    } finally {
      // The consumer stopped reading (abort) while the turn was still running.
      const turn = session?.turn;
      if (session && turn && !turn.finished && !paused) void this.abandon(session, turn);
    }
  }

  /** Continues a turn paused by an earlier call, if this call answers what it waits for. */
  private async continueHeld<TOptions extends object>(
    session: WarmSession,
    options: Options<TOptions>,
  ): Promise<Turn | undefined> {
    const turn = session.turn;
    if (!turn || turn.finished) return undefined;
    for (const [approvalId, held] of turn.heldPermissions) {
      const approved = options.approvals?.get(approvalId);
      if (approved === undefined) continue;
      held.resolve(outcomeForApproval(held.request, approved));
      turn.heldPermissions.delete(approvalId);
    }
    for (const [toolCallId, call] of turn.heldTools) {
      const message = options.messages.find((m) => m.role === "tool" && m.toolCallId === toolCallId);
      if (!message) continue;
      call.complete(toolResult(message));
      turn.heldTools.delete(toolCallId);
    }
    if (turn.heldPermissions.size === 0 && turn.heldTools.size === 0) return turn;
    // The client moved on without answering: the paused turn is over.
    await this.stopTurn(session, turn);
    if (!this.pool.get(session.key)) {
      throw new AcpHarnessError(
        "thread_busy",
        `${this.config.name}: the paused turn did not stop; start the thread again`,
      );
    }
    return undefined;
  }

  private async startTurn<TOptions extends object>(
    session: WarmSession,
    ctx: RunContext<TOptions>,
    resumed: boolean,
  ): Promise<Turn> {
    if (session.turn && !session.turn.finished) {
      throw new AcpHarnessError(
        "thread_busy",
        `${this.config.name}: a turn is already running on this thread`,
      );
    }
    const { options, sandbox } = ctx;
    const outputSchema = options.outputSchema as JSONSchema | undefined;
    const mapper = new AcpEventMapper({
      name: this.config.name,
      planEventName: this.config.planEventName,
      holdText: outputSchema !== undefined,
      createId,
    });
    const turn = new Turn(
      session.link,
      session.sessionId,
      mapper,
      this.config.turnTimeoutMs ?? DEFAULTS.turnTimeoutMs,
    );
    const snapshot = this.config.emitDiff ? await snapshotFiles(sandbox, { dir: session.cwd }) : undefined;
    this.turnState.set(turn, { outputSchema, snapshot });
    const build = this.config.buildPrompt ?? defaultBuildPrompt;
    const prompt = build({
      messages: options.messages,
      resumed,
      outputSchema,
      systemPrompts: (options.systemPrompts ?? []).map((p) => (typeof p === "string" ? p : p.content)),
    });
    session.turn = turn;
    turn.start(fitToCapabilities(toBlocks(prompt), session.link.init.agentCapabilities?.promptCapabilities));
    return turn;
  }

  /** Streams the turn until it ends or pauses. Returns true when it paused for the client. */
  private async *drive<TOptions extends object>(
    session: WarmSession,
    turn: Turn,
    ctx: RunContext<TOptions>,
  ): AsyncGenerator<AdapterYieldChunk, boolean, undefined> {
    for (;;) {
      const item = await turn.next(ctx.signal, turn.deadline);
      if (item === "aborted" || item === "timeout") {
        yield* this.interrupted(session, turn, item, ctx.ids);
        return false;
      }
      switch (item.kind) {
        case "update":
          yield* turn.mapper.map(item.update);
          break;
        case "permission":
          if (yield* this.permission(turn, item, ctx)) {
            this.pauseUntilDeadline(session, turn);
            return true;
          }
          break;
        case "tool":
          yield* this.bridgedCalls(
            turn,
            [item.call, ...turn.drainQueued("tool").map((t) => t.call)],
            ctx.ids,
          );
          this.pauseUntilDeadline(session, turn);
          return true;
        case "done":
          yield* this.finish(session, turn, item.response, ctx);
          return false;
        case "failed":
          yield* turn.mapper.closeAll(true);
          turn.finish();
          session.turn = undefined;
          throw item.error;
      }
    }
  }

  /** Resolves a permission request, or pauses the run for the client. Returns true when paused. */
  private async *permission<TOptions extends object>(
    turn: Turn,
    item: Extract<TurnItem, { kind: "permission" }>,
    ctx: RunContext<TOptions>,
  ): AsyncGenerator<AdapterYieldChunk, boolean, undefined> {
    if (item.signal.aborted) return false;
    // A custom handler may take long; an abort must still end the turn promptly.
    const decision = await untilAborted(this.decide(turn, item, ctx.options), ctx.signal);
    if (decision === "aborted") {
      // Answered with "cancelled" by Turn.cancel, after session/cancel went out.
      turn.heldPermissions.set(`aborted_${item.request.toolCall.toolCallId}`, {
        approvalId: "",
        request: item.request,
        resolve: item.resolve,
      });
      return false;
    }
    if (decision !== "ask") {
      item.resolve(decision);
      return false;
    }
    const toolCall = item.request.toolCall;
    const approvalId = `approval_${toolCall.toolCallId}`;
    turn.heldPermissions.set(approvalId, { approvalId, request: item.request, resolve: item.resolve });
    if (turn.mapper.toolName(toolCall.toolCallId) === undefined) {
      yield* turn.mapper.map({ ...toolCall, sessionUpdate: "tool_call_update" });
    }
    yield* turn.mapper.pause(toolCall.toolCallId);
    const toolName = turn.mapper.toolName(toolCall.toolCallId) ?? "tool";
    const input = toolCall.rawInput ?? {};
    yield custom("approval-requested", {
      toolCallId: toolCall.toolCallId,
      toolName,
      input,
      approval: { id: approvalId, needsApproval: true },
    });
    yield {
      type: EventType.RUN_FINISHED,
      threadId: ctx.ids.threadId,
      runId: ctx.ids.runId,
      finishReason: null,
      outcome: {
        type: "interrupt",
        interrupts: [
          {
            id: approvalId,
            reason: "tool_call",
            message: `Approval required: ${toolCall.title ?? toolName}`,
            toolCallId: toolCall.toolCallId,
            metadata: { kind: "approval", toolName, input, options: item.request.options },
          },
        ],
      },
      timestamp: Date.now(),
    } as AdapterYieldChunk;
    return true;
  }

  private async decide<TOptions extends object>(
    turn: Turn,
    item: Extract<TurnItem, { kind: "permission" }>,
    options: Options<TOptions>,
  ): Promise<PermissionOutcome | "ask"> {
    const { request } = item;
    const kind = request.toolCall.kind ?? turn.mapper.toolKind(request.toolCall.toolCallId);
    if (this.config.onPermissionRequest) {
      return this.config.onPermissionRequest({ ...request, knownKind: kind, signal: item.signal });
    }
    const mode = options.modelOptions?.permissionMode ?? this.config.permissionMode ?? "bypassPermissions";
    if (decideByMode(mode, kind) === "allow") return allowOutcome(request);
    return (this.config.permissions ?? "headless") === "interactive" ? "ask" : rejectOutcome(request);
  }

  /**
   * Hands the agent's MCP calls of chat() tools to the engine as ordinary tool
   * calls and ends this model step with `tool_calls`: the engine validates the
   * input, applies `needsApproval`, runs the tool and calls `chatStream` again
   * with the result, which `continueHeld` passes back to the agent.
   */
  private *bridgedCalls(turn: Turn, calls: BridgedToolCall[], ids: RunIds): Generator<AdapterYieldChunk> {
    yield* turn.mapper.pause(undefined);
    for (const [index, call] of calls.entries()) {
      turn.heldTools.set(call.toolCallId, call);
      yield {
        type: EventType.TOOL_CALL_START,
        toolCallId: call.toolCallId,
        toolCallName: call.toolName,
        index,
        timestamp: Date.now(),
      } as AdapterYieldChunk;
      yield {
        type: EventType.TOOL_CALL_ARGS,
        toolCallId: call.toolCallId,
        delta: JSON.stringify(call.args),
        timestamp: Date.now(),
      };
      yield {
        type: EventType.TOOL_CALL_END,
        toolCallId: call.toolCallId,
        input: call.args,
        timestamp: Date.now(),
      } as AdapterYieldChunk;
    }
    yield {
      type: EventType.RUN_FINISHED,
      threadId: ids.threadId,
      runId: ids.runId,
      finishReason: "tool_calls",
      timestamp: Date.now(),
    } as AdapterYieldChunk;
  }

  private async *finish<TOptions extends object>(
    session: WarmSession,
    turn: Turn,
    response: PromptResponse,
    ctx: RunContext<TOptions>,
  ): Chunks {
    turn.finish();
    session.turn = undefined;
    const state = this.turnState.get(turn);
    const cancelled = response.stopReason === "cancelled";
    yield* turn.mapper.closeAll(cancelled);
    const texts = turn.mapper.agentTexts();
    let failed = false;
    if (state?.outputSchema !== undefined) {
      const chunks =
        response.stopReason === "end_turn" ? finishStructuredTurn(texts, ctx.ids) : releaseTexts(texts);
      failed = chunks.some((c) => c.type === EventType.RUN_ERROR);
      yield* chunks;
    }
    if (state?.snapshot) yield* await this.fileChanges(ctx.sandbox, session.cwd, state.snapshot);
    this.pool.release(session, this.config.keepWarmMs ?? DEFAULTS.keepWarmMs);
    if (!failed) yield this.terminal(response, turn, ctx.ids);
  }

  private async fileChanges(
    sandbox: SandboxInstance,
    cwd: string,
    before: NonNullable<TurnState["snapshot"]>,
  ): Promise<AdapterYieldChunk[]> {
    const after = await snapshotFiles(sandbox, { dir: cwd });
    return diffSnapshots(before, after).map((change) =>
      custom("file.changed", {
        type: change.type,
        path: `${cwd}/${change.path}`,
        diff: change.diff,
        timestamp: Date.now(),
      }),
    );
  }

  /**
   * The five ACP stop reasons, each distinguishable on the wire (`result.stopReason`), with the
   * turn's usage: token counts in `usage`, the agent's own figures in `result`.
   */
  private terminal(response: PromptResponse, turn: Turn, ids: RunIds): AdapterYieldChunk {
    const cost = turnUsage(response, turn.mapper.lastUsageUpdate());
    const usage = cost.usage ? { usage: cost.usage } : {};
    const base = {
      threadId: ids.threadId,
      runId: ids.runId,
      result: { stopReason: response.stopReason, ...cost.result },
      ...usage,
      timestamp: Date.now(),
    };
    switch (response.stopReason) {
      case "refusal":
        return {
          type: EventType.RUN_ERROR,
          message: this.config.refusalMessage ?? `${this.config.name} refused the request`,
          code: "refusal",
          ...usage,
          timestamp: Date.now(),
        };
      case "cancelled":
        // finishReason null + result.stopReason tell a cancel apart from a success.
        return { type: EventType.RUN_FINISHED, ...base, finishReason: null } as AdapterYieldChunk;
      case "max_tokens":
      case "max_turn_requests":
        return {
          type: EventType.RUN_FINISHED,
          ...base,
          finishReason: "length",
          outcome: { type: "success" },
        } as AdapterYieldChunk;
      default:
        return {
          type: EventType.RUN_FINISHED,
          ...base,
          finishReason: "stop",
          outcome: { type: "success" },
        } as AdapterYieldChunk;
    }
  }

  /** Abort or turn timeout: cancel the ACP turn, close what is open, end with a terminal event. */
  private async *interrupted(
    session: WarmSession,
    turn: Turn,
    why: "aborted" | "timeout",
    ids: RunIds,
  ): Chunks {
    const stopped = await this.stopTurn(session, turn);
    yield* stopped.chunks;
    yield* turn.mapper.closeAll(true);
    if (why === "timeout") {
      throw new AcpHarnessError(
        "turn_timeout",
        `${this.config.name}: the turn did not finish within ${this.config.turnTimeoutMs ?? DEFAULTS.turnTimeoutMs} ms`,
      );
    }
    yield {
      type: EventType.RUN_FINISHED,
      threadId: ids.threadId,
      runId: ids.runId,
      finishReason: null,
      result: { stopReason: stopped.stopReason ?? "cancelled", aborted: true },
      timestamp: Date.now(),
    } as AdapterYieldChunk;
  }

  /**
   * Sends session/cancel and waits (bounded) for the agent to end the turn. An
   * agent that does not stop in time is killed and its session dropped.
   * Returns the agent's stop reason when it stopped.
   */
  private async stopTurn(
    session: WarmSession,
    turn: Turn,
  ): Promise<{ stopReason: string | undefined; chunks: AdapterYieldChunk[] }> {
    await turn.cancel();
    const until = Date.now() + DEFAULTS.cancelGraceMs;
    // Updates the agent sends while it winds down still belong to the turn.
    const chunks: AdapterYieldChunk[] = [];
    for (;;) {
      const item = await turn.next(undefined, until);
      if (item === "timeout" || item === "aborted" || item.kind === "failed") break;
      if (item.kind === "permission") item.resolve(CANCELLED);
      if (item.kind === "tool") item.call.fail("The turn was cancelled");
      if (item.kind === "update") chunks.push(...turn.mapper.map(item.update));
      if (item.kind === "done") {
        turn.finish();
        session.turn = undefined;
        this.pool.release(session, this.config.keepWarmMs ?? DEFAULTS.keepWarmMs);
        return { stopReason: item.response.stopReason, chunks };
      }
    }
    await this.pool.evict(session);
    return { stopReason: undefined, chunks };
  }

  /** A paused turn keeps its agent only until the turn deadline if nobody continues it. */
  private pauseUntilDeadline(session: WarmSession, turn: Turn): void {
    this.pool.release(session, Math.max(1, turn.deadline - Date.now()));
  }

  private async abandon(session: WarmSession, turn: Turn): Promise<void> {
    await this.stopTurn(session, turn).catch(() => this.pool.evict(session));
  }
}

function sandboxOf<TOptions extends object>(options: Options<TOptions>, name: string): SandboxInstance {
  const sandbox = options.capabilities ? getSandbox(options.capabilities, { optional: true }) : undefined;
  if (!sandbox) {
    throw new AcpHarnessError(
      "config",
      `${name}: no sandbox; add withSandbox(sandbox) to chat({ middleware })`,
    );
  }
  return sandbox;
}

function signalOf<TOptions extends object>(options: Options<TOptions>): AbortSignal | undefined {
  const request = options.request;
  return request && "signal" in request && request.signal ? request.signal : undefined;
}

function bridgeTools<TOptions extends object>(options: Options<TOptions>): BridgeTool[] {
  return (options.tools ?? []).map((tool) => ({
    name: tool.name,
    description: tool.description,
    inputSchema: tool.inputSchema as Record<string, unknown> | undefined,
  }));
}

function toolResult(message: ModelMessage): {
  content: Array<{ type: "text"; text: string }>;
  isError: boolean;
} {
  const text = typeof message.content === "string" ? message.content : JSON.stringify(message.content);
  return { content: [{ type: "text", text }], isError: message.error !== undefined || isErrorPayload(text) };
}

/** The engine reports failed tools (validation, denial, throw) as `{ "error": … }`. */
function isErrorPayload(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return (
      typeof value === "object" &&
      value !== null &&
      !Array.isArray(value) &&
      Object.keys(value).join() === "error"
    );
  } catch {
    return false;
  }
}

function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T | "aborted"> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.resolve("aborted");
  return Promise.race([
    promise,
    new Promise<"aborted">((resolve) =>
      signal.addEventListener("abort", () => resolve("aborted"), { once: true }),
    ),
  ]);
}

function runError(err: unknown): AdapterYieldChunk {
  const code = err instanceof AcpHarnessError ? err.code : "acp_error";
  return { type: EventType.RUN_ERROR, message: errorMessage(err), code, timestamp: Date.now() };
}

function stringOr(value: unknown, fallback: string): string {
  return typeof value === "string" && value !== "" ? value : fallback;
}

function createId(prefix: string): string {
  return `${prefix}_${randomUUID()}`;
}
