import type { SessionUpdate } from "@agentclientprotocol/sdk";
import { UPDATE_BATCH } from "../session.js";
import type { Turn } from "../turn.js";

/** 1x1 transparent PNG. */
export const TINY_PNG_BASE64 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGBgAAAABQABpfZFQAAAAABJRU5ErkJggg==";

export async function chunks(turn: Turn, count: number, text: string | undefined): Promise<void> {
  for (let first = 1; first <= count; first += UPDATE_BATCH) {
    const batch: SessionUpdate[] = [];
    for (let i = first; i < first + UPDATE_BATCH && i <= count; i++) {
      batch.push({
        sessionUpdate: "agent_message_chunk",
        content: { type: "text", text: text ?? `chunk ${i} ` },
      });
    }
    await turn.emitBatch(batch);
    turn.checkCancelled();
  }
}

export async function slow(turn: Turn, count: number, ms: number): Promise<void> {
  for (let i = 1; i <= count; i++) {
    if (i > 1) await turn.sleep(ms);
    await turn.message(`chunk ${i} `);
  }
}

export function think(turn: Turn, text: string): Promise<void> {
  return turn.emit({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text } });
}

export function image(turn: Turn): Promise<void> {
  return turn.emit({
    sessionUpdate: "agent_message_chunk",
    content: { type: "image", mimeType: "image/png", data: TINY_PNG_BASE64 },
  });
}

export async function messages(turn: Turn): Promise<void> {
  const base = `${turn.sessionId}-${turn.session.history.length}`;
  await turn.emit({
    sessionUpdate: "agent_message_chunk",
    messageId: `${base}-a`,
    content: { type: "text", text: "first message" },
  });
  await turn.emit({
    sessionUpdate: "agent_message_chunk",
    messageId: `${base}-b`,
    content: { type: "text", text: "second message" },
  });
}

export function bigline(turn: Turn, bytes: number): Promise<void> {
  return turn.message("x".repeat(bytes));
}

export function plan(turn: Turn, entries: string[]): Promise<void> {
  return turn.emit({
    sessionUpdate: "plan",
    entries: entries.map((content, i) => ({
      content,
      priority: "medium",
      status: i === 0 ? "in_progress" : "pending",
    })),
  });
}

export function usage(turn: Turn, tokens: number | undefined): Promise<void> {
  const used = tokens ?? turn.session.history.length * 10;
  return turn.emit({
    sessionUpdate: "usage_update",
    used,
    size: 200_000,
    cost: { amount: used / 1_000_000, currency: "USD" },
  });
}

/** Sets the token counts the turn's `PromptResponse.usage` reports (a draft ACP field). */
export function turnUsage(turn: Turn, input: number, output: number, thought: number | undefined): void {
  turn.usage = {
    inputTokens: input,
    outputTokens: output,
    ...(thought === undefined ? {} : { thoughtTokens: thought }),
    totalTokens: input + output + (thought ?? 0),
  };
}

export async function title(turn: Turn, text: string): Promise<void> {
  turn.session.title = text;
  await turn.emit({ sessionUpdate: "session_info_update", title: text, updatedAt: new Date().toISOString() });
}

export function commands(turn: Turn): Promise<void> {
  return turn.emit({
    sessionUpdate: "available_commands_update",
    availableCommands: [
      { name: "echo", description: "Echo text back", input: { hint: "text" } },
      { name: "chunks", description: "Stream N chunks", input: { hint: "N [text]" } },
      { name: "tool", description: "Run a fake tool call", input: { hint: "<kind> <title>" } },
    ],
  });
}

export function meta(turn: Turn): Promise<void> {
  return turn.message(JSON.stringify(turn.meta ?? null));
}

export function env(turn: Turn, name: string): Promise<void> {
  return turn.message(`${name}=${process.env[name] ?? "(unset)"}`);
}

/** Describes the prompt's content blocks, e.g. `blocks: text, image(image/png), resource_link(file:///a)`. */
export function blocks(turn: Turn): Promise<void> {
  const described = turn.prompt.map((b) => {
    switch (b.type) {
      case "text":
        return "text";
      case "image":
      case "audio":
        return `${b.type}(${b.mimeType})`;
      case "resource_link":
        return `resource_link(${b.uri})`;
      case "resource":
        return `resource(${b.resource.uri})`;
      default:
        return "unknown";
    }
  });
  return turn.message(`blocks: ${described.join(", ")}`);
}

/** A session/update of a type no client knows; clients must ignore it. */
export async function unknownUpdate(turn: Turn): Promise<void> {
  await turn.raw(
    JSON.stringify({
      jsonrpc: "2.0",
      method: "session/update",
      params: { sessionId: turn.sessionId, update: { sessionUpdate: "_vendor_x", payload: { mock: true } } },
    }),
  );
}
