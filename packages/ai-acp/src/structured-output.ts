import { EventType, type AdapterYieldChunk } from "@tanstack/ai";
import {
  parseJsonFromAssistantText,
  structuredOutputCompleteChunk,
  structuredOutputStartChunk,
} from "@tanstack/ai/adapter-internals";
import type { AgentText } from "./events.js";

/**
 * The output contract goes before the task: an agent reads the whole prompt
 * either way, and the task text stays the last thing it sees.
 */
export function withOutputSchemaInstruction(prompt: string, schema: unknown): string {
  return `Your final message must be a single JSON object that matches this JSON Schema, with no prose around it:\n${JSON.stringify(schema)}\n\n${prompt}`;
}

export interface RunIds {
  model: string;
  threadId: string;
  runId: string;
}

/**
 * Ends a structured-output turn. The agent's text was held back while it
 * streamed; every message but the last is released as ordinary text, and the
 * last one becomes the structured-output part (never also a text part). The
 * engine validates the object against the schema.
 */
export function finishStructuredTurn(texts: ReadonlyArray<AgentText>, ids: RunIds): AdapterYieldChunk[] {
  const last = texts[texts.length - 1];
  const out: AdapterYieldChunk[] = texts.slice(0, -1).flatMap((text) => textMessage(text));
  if (!last || last.text.trim() === "") {
    out.push(
      runError(
        "The agent produced no text to parse as structured output",
        "structured-output-missing-result",
      ),
    );
    return out;
  }
  let object: unknown;
  try {
    object = parseJsonFromAssistantText(last.text);
  } catch (err) {
    const detail = last.text.slice(0, 200);
    out.push(
      runError(
        `The agent's last message is not JSON (${err instanceof Error ? err.message : String(err)}): ${detail}`,
        "structured-output-parse-failed",
      ),
    );
    return out;
  }
  out.push(structuredOutputStartChunk({ messageId: last.id, ...ids }));
  out.push(structuredOutputCompleteChunk({ messageId: last.id, object, raw: last.text, ...ids }));
  return out;
}

/** Held-back text of a turn that ended without a structured answer (refusal, cancel, limits). */
export function releaseTexts(texts: ReadonlyArray<AgentText>): AdapterYieldChunk[] {
  return texts.flatMap((text) => textMessage(text));
}

function textMessage(text: AgentText): AdapterYieldChunk[] {
  if (text.text === "") return [];
  return [
    { type: EventType.TEXT_MESSAGE_START, messageId: text.id, role: "assistant", timestamp: Date.now() },
    { type: EventType.TEXT_MESSAGE_CONTENT, messageId: text.id, delta: text.text, timestamp: Date.now() },
    { type: EventType.TEXT_MESSAGE_END, messageId: text.id, timestamp: Date.now() },
  ];
}

function runError(message: string, code: string): AdapterYieldChunk {
  return { type: EventType.RUN_ERROR, message, code, timestamp: Date.now() };
}
