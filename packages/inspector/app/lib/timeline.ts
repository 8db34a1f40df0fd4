/**
 * One session's conversation, built from the JSON-RPC traffic of its connection in wire order:
 * prompts sent, `session/update`s, permission requests and their answers, turn results, errors and
 * the server's `session/ended`. Items are mutated in place and carry a `rev` that changes with them.
 */
import type {
  ContentBlock,
  PlanEntry,
  PermissionOption,
  SessionConfigOption,
  SessionModeState,
  SessionUpdate,
  StopReason,
  ToolCallContent,
  ToolCallUpdate,
} from "@agentclientprotocol/sdk";

export interface ToolCallState {
  toolCallId: string;
  title: string;
  kind?: string;
  status: string;
  content: ToolCallContent[];
  locations: { path: string; line?: number | null }[];
  rawInput?: unknown;
  rawOutput?: unknown;
}

export type PermissionAnswer = { outcome: "selected"; optionId: string } | { outcome: "cancelled" };

export type Item = { key: number; rev: number } & (
  | { kind: "user"; blocks: ContentBlock[] }
  | { kind: "agent"; blocks: ContentBlock[]; messageId?: string }
  | { kind: "thought"; text: string }
  | { kind: "tool"; call: ToolCallState }
  | { kind: "plan"; entries: PlanEntry[] }
  | {
      kind: "permission";
      requestKey: string;
      toolCall: ToolCallUpdate;
      options: PermissionOption[];
      answer?: PermissionAnswer;
    }
  | { kind: "turn"; stopReason: StopReason }
  | { kind: "error"; title: string; message: string; detail?: string }
  | {
      kind: "ended";
      reason: string;
      exitCode: number | null;
      signal: string | null;
      stderrTail: string;
    }
  | { kind: "note"; text: string }
);

type ItemOf<K extends Item["kind"]> = Extract<Item, { kind: K }>;

let nextKey = 1;

export class Timeline {
  readonly items: Item[] = [];
  title?: string;
  modes?: SessionModeState;
  configOptions?: SessionConfigOption[];
  usage?: { used: number; size: number };
  /** A prompt is in flight. */
  running = false;
  ended = false;
  private readonly tools = new Map<string, ItemOf<"tool">>();
  private plan: ItemOf<"plan"> | undefined;

  private push<K extends Item["kind"]>(item: Omit<ItemOf<K>, "key" | "rev">): ItemOf<K> {
    const full = { ...item, key: nextKey++, rev: 0 } as unknown as ItemOf<K>;
    this.items.push(full);
    return full;
  }

  private last(): Item | undefined {
    return this.items[this.items.length - 1];
  }

  /** A prompt this page sent (or a replayed user message). */
  userPrompt(blocks: ContentBlock[]): void {
    this.push<"user">({ kind: "user", blocks: [...blocks] });
    this.plan = undefined;
    this.running = true;
  }

  turnEnded(stopReason: StopReason): void {
    this.running = false;
    this.push<"turn">({ kind: "turn", stopReason });
  }

  error(title: string, message: string, detail?: string): void {
    this.running = false;
    this.push<"error">({ kind: "error", title, message, ...(detail ? { detail } : {}) });
  }

  sessionEnded(reason: string, exitCode: number | null, signal: string | null, stderrTail: string): void {
    this.running = false;
    this.ended = true;
    this.push<"ended">({ kind: "ended", reason, exitCode, signal, stderrTail });
  }

  permissionAsked(requestKey: string, toolCall: ToolCallUpdate, options: PermissionOption[]): void {
    this.push<"permission">({ kind: "permission", requestKey, toolCall, options });
  }

  permissionAnswered(requestKey: string, answer: PermissionAnswer): void {
    const item = this.items.find((i) => i.kind === "permission" && i.requestKey === requestKey);
    if (item?.kind !== "permission") return;
    item.answer = answer;
    item.rev++;
  }

  apply(update: SessionUpdate): void {
    switch (update.sessionUpdate) {
      case "user_message_chunk":
        return this.appendChunk("user", update.content, update.messageId ?? undefined);
      case "agent_message_chunk":
        return this.appendChunk("agent", update.content, update.messageId ?? undefined);
      case "agent_thought_chunk":
        return this.appendThought(update.content);
      case "tool_call":
      case "tool_call_update":
        return this.toolCall(update);
      case "plan":
        return this.setPlan(update.entries);
      case "current_mode_update":
        if (this.modes) this.modes = { ...this.modes, currentModeId: update.currentModeId };
        return void this.push<"note">({ kind: "note", text: `mode: ${update.currentModeId}` });
      case "config_option_update":
        this.configOptions = update.configOptions;
        return;
      case "session_info_update":
        if (typeof update.title === "string") {
          this.title = update.title;
          this.push<"note">({ kind: "note", text: `title: ${update.title}` });
        }
        return;
      case "usage_update":
        this.usage = { used: update.used, size: update.size };
        return;
      case "available_commands_update":
        return;
      default:
        this.push<"note">({
          kind: "note",
          text: `${(update as { sessionUpdate: string }).sessionUpdate}: ${JSON.stringify(update)}`,
        });
    }
  }

  private appendChunk(kind: "user" | "agent", content: ContentBlock, messageId: string | undefined): void {
    const last = this.last();
    if (last?.kind === kind && (kind === "user" || (last.kind === "agent" && last.messageId === messageId))) {
      appendBlock(last.blocks, content);
      last.rev++;
      return;
    }
    if (kind === "user") this.push<"user">({ kind, blocks: [content] });
    else this.push<"agent">({ kind, blocks: [content], ...(messageId ? { messageId } : {}) });
  }

  private appendThought(content: ContentBlock): void {
    const text = content.type === "text" ? content.text : `[${content.type}]`;
    const last = this.last();
    if (last?.kind === "thought") {
      last.text += text;
      last.rev++;
    } else this.push<"thought">({ kind: "thought", text });
  }

  private toolCall(update: ToolCallUpdate & { title?: string | null }): void {
    let item = this.tools.get(update.toolCallId);
    if (!item) {
      item = this.push<"tool">({
        kind: "tool",
        call: { toolCallId: update.toolCallId, title: "", status: "pending", content: [], locations: [] },
      });
      this.tools.set(update.toolCallId, item);
    }
    const call = item.call;
    if (update.title) call.title = update.title;
    if (update.kind) call.kind = update.kind;
    if (update.status) call.status = update.status;
    if (update.content) call.content = update.content;
    if (update.locations) call.locations = update.locations;
    if (update.rawInput !== undefined) call.rawInput = update.rawInput;
    if (update.rawOutput !== undefined) call.rawOutput = update.rawOutput;
    item.rev++;
  }

  private setPlan(entries: PlanEntry[]): void {
    if (this.plan) {
      this.plan.entries = entries;
      this.plan.rev++;
    } else this.plan = this.push<"plan">({ kind: "plan", entries });
  }
}

/** Text chunks join the previous text block; other blocks (images, links) stand on their own. */
function appendBlock(blocks: ContentBlock[], content: ContentBlock): void {
  const last = blocks[blocks.length - 1];
  if (last?.type === "text" && content.type === "text")
    blocks[blocks.length - 1] = { ...last, text: last.text + content.text };
  else blocks.push(content);
}
