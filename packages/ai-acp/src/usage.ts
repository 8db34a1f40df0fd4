import type { Cost, PromptResponse, Usage, UsageUpdate } from "@agentclientprotocol/sdk/unstable";
import type { TokenUsage } from "@tanstack/ai";

/** The last `usage_update` of a turn, without its discriminator. */
export interface ContextUsage {
  /** Tokens in the agent's context window. */
  used: number;
  /** Size of the context window. */
  size: number;
  /** Cumulative cost of the session, when the agent reports it. */
  cost?: Cost | null;
}

/** What a finished turn reports about its usage, in the two places RUN_FINISHED has for it. */
export interface TurnUsage {
  /** The agent's token counts for the turn as TanStack's `TokenUsage` (RUN_FINISHED `usage`). */
  usage: TokenUsage | undefined;
  /** The agent's own figures as ACP sent them (RUN_FINISHED `result.usage` / `result.usageUpdate`). */
  result: { usage?: Usage; usageUpdate?: ContextUsage };
}

/**
 * The turn's usage from `PromptResponse.usage` (a draft ACP field; agents that do not send it
 * report none) and the last `usage_update` notification of the turn.
 */
export function turnUsage(response: PromptResponse, update: UsageUpdate | undefined): TurnUsage {
  const usage = isUsage(response.usage) ? response.usage : undefined;
  return {
    usage: usage ? toTokenUsage(usage) : undefined,
    result: {
      ...(usage ? { usage } : {}),
      ...(update ? { usageUpdate: contextUsage(update) } : {}),
    },
  };
}

function toTokenUsage(usage: Usage): TokenUsage {
  const tokens: TokenUsage = {
    promptTokens: usage.inputTokens,
    completionTokens: usage.outputTokens,
    totalTokens: usage.totalTokens,
  };
  if (typeof usage.thoughtTokens === "number") {
    tokens.completionTokensDetails = { reasoningTokens: usage.thoughtTokens };
  }
  const cached = {
    ...(typeof usage.cachedReadTokens === "number" ? { cachedTokens: usage.cachedReadTokens } : {}),
    ...(typeof usage.cachedWriteTokens === "number" ? { cacheWriteTokens: usage.cachedWriteTokens } : {}),
  };
  if (Object.keys(cached).length > 0) tokens.promptTokensDetails = cached;
  return tokens;
}

function contextUsage(update: UsageUpdate): ContextUsage {
  return { used: update.used, size: update.size, ...(update.cost ? { cost: update.cost } : {}) };
}

/** Agents send what they send: only well-formed counts become usage. */
function isUsage(value: unknown): value is Usage {
  if (typeof value !== "object" || value === null) return false;
  const { inputTokens, outputTokens, totalTokens } = value as Record<string, unknown>;
  return [inputTokens, outputTokens, totalTokens].every((n) => typeof n === "number" && Number.isFinite(n));
}
