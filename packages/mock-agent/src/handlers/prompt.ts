import {
  RequestError,
  type AgentContext,
  type ContentBlock,
  type PromptRequest,
  type StopReason,
} from "@agentclientprotocol/sdk";
// The draft schema's PromptResponse: it has the turn's `usage`.
import type { PromptResponse } from "@agentclientprotocol/sdk/unstable";
import { parseScript, ScriptError } from "../script.js";
import type { AgentState } from "../state.js";
import { Turn, TurnStop } from "../turn.js";
import { requireSession } from "./lifecycle.js";
import { runScript } from "./run.js";

function promptText(prompt: readonly ContentBlock[]): string {
  return prompt
    .filter((b): b is Extract<ContentBlock, { type: "text" }> => b.type === "text")
    .map((b) => b.text)
    .join("\n");
}

function firstWords(text: string): string {
  return text.trim().split(/\s+/).slice(0, 6).join(" ").slice(0, 80);
}

export async function prompt(
  state: AgentState,
  client: AgentContext,
  params: PromptRequest,
): Promise<PromptResponse> {
  const session = requireSession(state, params.sessionId);
  if (state.turns.has(session.sessionId))
    throw RequestError.invalidRequest(undefined, `session ${session.sessionId} already has a prompt running`);
  const text = promptText(params.prompt);
  let commands;
  try {
    commands = parseScript(text);
  } catch (error) {
    if (error instanceof ScriptError) throw RequestError.invalidParams(undefined, error.message);
    throw error;
  }
  const abort = new AbortController();
  state.turns.set(session.sessionId, abort);
  session.title ??= firstWords(text) || null;
  for (const content of params.prompt) session.history.push({ sessionUpdate: "user_message_chunk", content });
  // Saved before running too, so a crash mid-turn still leaves the prompt in the stored history.
  state.store.save(session);
  const turn = new Turn(state, session, client, abort.signal, params.prompt, params._meta);
  try {
    await runScript(turn, commands);
    return response("end_turn", turn);
  } catch (error) {
    if (error instanceof TurnStop) return response(error.reason, turn);
    throw error;
  } finally {
    state.turns.delete(session.sessionId);
    session.updatedAt = new Date().toISOString();
    state.store.save(session);
  }
}

function response(stopReason: StopReason, turn: Turn): PromptResponse {
  return turn.usage ? { stopReason, usage: turn.usage } : { stopReason };
}

export function cancel(state: AgentState, sessionId: string): void {
  state.turns.get(sessionId)?.abort();
}
