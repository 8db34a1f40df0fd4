import type {
  ContentBlock,
  SessionUpdate,
  ToolCallContent,
  ToolCallUpdate,
  UsageUpdate,
} from "@agentclientprotocol/sdk";
import { EventType, type AdapterYieldChunk as AdapterChunk } from "@tanstack/ai";

interface ToolState {
  id: string;
  name: string;
  kind: string | undefined;
  title: string | undefined;
  status: string;
  rawInput: unknown;
  rawOutput: unknown;
  content: ToolCallContent[];
  locations: unknown[];
  argsSent: boolean;
  ended: boolean;
}

interface OpenMessage {
  id: string;
  acpId: string | undefined;
}

export interface EventMapperOptions {
  name: string;
  planEventName: string | undefined;
  /** Structured-output turns keep agent text out of TEXT_MESSAGE events; the adapter decides at the end. */
  holdText: boolean;
  createId: (prefix: string) => string;
}

/** A text message the agent produced in this turn, in order. */
export interface AgentText {
  id: string;
  text: string;
}

/**
 * Maps one turn's ACP `session/update`s to AG-UI chunks. Stateful: it tracks the
 * open text/reasoning message and every tool call so partial `tool_call_update`
 * patches merge, and so the turn can close whatever is still open at its end.
 */
export class AcpEventMapper {
  private text: OpenMessage | undefined;
  private reasoning: OpenMessage | undefined;
  private readonly tools = new Map<string, ToolState>();
  private readonly texts: AgentText[] = [];
  private usage: UsageUpdate | undefined;

  constructor(private readonly options: EventMapperOptions) {}

  /** The last `usage_update` of this turn: reported once, when the turn ends. */
  lastUsageUpdate(): UsageUpdate | undefined {
    return this.usage;
  }

  /** Agent text of this turn, one entry per message. */
  agentTexts(): ReadonlyArray<AgentText> {
    return this.texts;
  }

  /** Kind reported by the agent for a tool call (never its title). */
  toolKind(toolCallId: string): string | undefined {
    return this.tools.get(toolCallId)?.kind;
  }

  toolName(toolCallId: string): string | undefined {
    return this.tools.get(toolCallId)?.name;
  }

  map(update: SessionUpdate): AdapterChunk[] {
    switch (update.sessionUpdate) {
      case "agent_message_chunk":
        return this.onMessageChunk(update.content, update.messageId ?? undefined);
      case "agent_thought_chunk":
        return this.onThoughtChunk(update.content, update.messageId ?? undefined);
      case "tool_call":
        return [...this.closeText(), ...this.closeReasoning(), ...this.onToolCall(update)];
      case "tool_call_update":
        return this.onToolCallUpdate(update);
      case "plan":
        return this.options.planEventName
          ? [custom(this.options.planEventName, { entries: update.entries })]
          : [];
      case "usage_update":
        this.usage = update;
        return [];
      default:
        // user_message_chunk only appears in replays; commands/modes are not turn output.
        return [];
    }
  }

  /** A run pauses: close open messages (AG-UI messages do not span runs) and end the tool call it waits on. */
  pause(toolCallId: string | undefined): AdapterChunk[] {
    const out = [...this.closeText(), ...this.closeReasoning()];
    const tool = toolCallId !== undefined ? this.tools.get(toolCallId) : undefined;
    if (tool && !tool.ended) out.push(...this.endTool(tool));
    return out;
  }

  /** Closes everything still open. `cancelled` marks unfinished tool calls as such in their result. */
  closeAll(cancelled: boolean): AdapterChunk[] {
    const out = [...this.closeText(), ...this.closeReasoning()];
    for (const tool of this.tools.values()) {
      if (tool.ended) continue;
      out.push(...this.endTool(tool));
      out.push(this.toolResult(tool, cancelled ? "cancelled" : tool.status));
    }
    return out;
  }

  private onMessageChunk(content: ContentBlock, acpId: string | undefined): AdapterChunk[] {
    const out = this.closeReasoning();
    if (content.type !== "text") {
      out.push(custom(`${this.options.name}.message-content`, { content }));
      return out;
    }
    if (!this.text || (acpId !== undefined && acpId !== this.text.acpId)) {
      out.push(...this.closeText());
      this.text = { id: acpId ?? this.options.createId("msg"), acpId };
      this.texts.push({ id: this.text.id, text: "" });
      if (!this.options.holdText) {
        out.push({
          type: EventType.TEXT_MESSAGE_START,
          messageId: this.text.id,
          role: "assistant",
          timestamp: now(),
        });
      }
    }
    const current = this.texts[this.texts.length - 1];
    if (current) current.text += content.text;
    if (!this.options.holdText && content.text !== "") {
      out.push({
        type: EventType.TEXT_MESSAGE_CONTENT,
        messageId: this.text.id,
        delta: content.text,
        timestamp: now(),
      });
    }
    return out;
  }

  private onThoughtChunk(content: ContentBlock, acpId: string | undefined): AdapterChunk[] {
    const out = this.closeText();
    if (content.type !== "text") return out;
    if (!this.reasoning || (acpId !== undefined && acpId !== this.reasoning.acpId)) {
      out.push(...this.closeReasoning());
      const id = acpId ?? this.options.createId("reasoning");
      this.reasoning = { id, acpId };
      out.push({ type: EventType.REASONING_START, messageId: id, timestamp: now() });
      out.push({
        type: EventType.REASONING_MESSAGE_START,
        messageId: id,
        role: "reasoning",
        timestamp: now(),
      });
    }
    if (content.text !== "") {
      out.push({
        type: EventType.REASONING_MESSAGE_CONTENT,
        messageId: this.reasoning.id,
        delta: content.text,
        timestamp: now(),
      });
    }
    return out;
  }

  private onToolCall(update: ToolCallUpdate & { title?: string | null }): AdapterChunk[] {
    if (this.tools.has(update.toolCallId)) return this.onToolCallUpdate(update);
    const tool: ToolState = {
      id: update.toolCallId,
      name: update.name ?? update.title ?? update.kind ?? "tool",
      kind: update.kind ?? undefined,
      title: update.title ?? undefined,
      status: update.status ?? "pending",
      rawInput: update.rawInput,
      rawOutput: update.rawOutput,
      content: update.content ?? [],
      locations: update.locations ?? [],
      argsSent: false,
      ended: false,
    };
    this.tools.set(tool.id, tool);
    const out: AdapterChunk[] = [
      {
        type: EventType.TOOL_CALL_START,
        toolCallId: tool.id,
        toolCallName: tool.name,
        // The agent runs its own tools; the engine must never try to execute them.
        metadata: { providerExecuted: true, kind: tool.kind, title: tool.title },
        // All native calls share one slot so a bridged chat() tool call in the same
        // segment replaces them in the engine's execution list (see HarnessRunner.bridgedCalls).
        index: 0,
        timestamp: now(),
      } as AdapterChunk,
    ];
    out.push(...this.progressTool(tool));
    return out;
  }

  private onToolCallUpdate(update: ToolCallUpdate): AdapterChunk[] {
    const tool = this.tools.get(update.toolCallId);
    if (!tool) {
      return this.onToolCall({ ...update, title: update.title ?? update.toolCallId });
    }
    // Patch semantics: only fields present in the update change.
    if (update.kind != null) tool.kind = update.kind;
    if (update.title != null) tool.title = update.title;
    if (update.name != null) tool.name = update.name;
    if (update.status != null) tool.status = update.status;
    if (update.rawInput !== undefined) tool.rawInput = update.rawInput;
    if (update.rawOutput !== undefined) tool.rawOutput = update.rawOutput;
    if (update.content != null) tool.content = update.content;
    if (update.locations != null) tool.locations = update.locations;
    return this.progressTool(tool);
  }

  private progressTool(tool: ToolState): AdapterChunk[] {
    const out: AdapterChunk[] = [];
    if (!tool.argsSent && tool.rawInput !== undefined && !tool.ended) {
      tool.argsSent = true;
      out.push({
        type: EventType.TOOL_CALL_ARGS,
        toolCallId: tool.id,
        delta: JSON.stringify(tool.rawInput),
        timestamp: now(),
      });
    }
    const running = tool.status === "in_progress";
    const done = tool.status === "completed" || tool.status === "failed";
    if ((running || done) && !tool.ended) out.push(...this.endTool(tool));
    if (done) out.push(this.toolResult(tool, tool.status));
    return out;
  }

  private endTool(tool: ToolState): AdapterChunk[] {
    tool.ended = true;
    const input =
      tool.rawInput !== undefined && typeof tool.rawInput === "object" ? tool.rawInput : undefined;
    return [
      { type: EventType.TOOL_CALL_END, toolCallId: tool.id, ...(input ? { input } : {}), timestamp: now() },
    ];
  }

  private toolResult(tool: ToolState, status: string): AdapterChunk {
    return {
      type: EventType.TOOL_CALL_RESULT,
      messageId: this.options.createId("toolresult"),
      toolCallId: tool.id,
      // Diffs, terminals and images stay inside the payload: AG-UI has no event of their own for them.
      content: JSON.stringify({
        status,
        kind: tool.kind,
        title: tool.title,
        content: tool.content,
        locations: tool.locations,
        rawOutput: tool.rawOutput,
      }),
      timestamp: now(),
    } as AdapterChunk;
  }

  private closeText(): AdapterChunk[] {
    if (!this.text) return [];
    const id = this.text.id;
    this.text = undefined;
    return this.options.holdText
      ? []
      : [{ type: EventType.TEXT_MESSAGE_END, messageId: id, timestamp: now() }];
  }

  private closeReasoning(): AdapterChunk[] {
    if (!this.reasoning) return [];
    const id = this.reasoning.id;
    this.reasoning = undefined;
    return [
      { type: EventType.REASONING_MESSAGE_END, messageId: id, timestamp: now() },
      { type: EventType.REASONING_END, messageId: id, timestamp: now() },
    ];
  }
}

export function custom(name: string, value: unknown): AdapterChunk {
  return { type: EventType.CUSTOM, name, value, timestamp: now() };
}

function now(): number {
  return Date.now();
}
