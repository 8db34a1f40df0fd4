import { isObject } from "../protocol.js";
import type { AgentSessionState } from "./state.js";

export interface ModelInfo {
  modelId: string;
  name: string;
  description?: string;
}

export interface ModelList {
  currentModelId: string | null;
  availableModels: ModelInfo[];
}

/** A `select` config option of the given category, if the agent offers one. */
export function selectOption(
  state: AgentSessionState | undefined,
  category: string,
): Record<string, unknown> | undefined {
  return state?.configOptions?.find(
    (o): o is Record<string, unknown> =>
      isObject(o) && o.category === category && o.type === "select" && typeof o.id === "string",
  );
}

/** Select options, with groups flattened. */
function choices(option: Record<string, unknown>): Record<string, unknown>[] {
  const options = Array.isArray(option.options) ? option.options.filter(isObject) : [];
  return options.flatMap((o) => (Array.isArray(o.options) ? o.options.filter(isObject) : [o]));
}

function modelInfo(modelId: unknown, name: unknown, description: unknown): ModelInfo | undefined {
  if (typeof modelId !== "string") return undefined;
  const info: ModelInfo = { modelId, name: typeof name === "string" ? name : modelId };
  if (typeof description === "string") info.description = description;
  return info;
}

/**
 * The session's models: from its `model` config option, else the unstable `models` field, else
 * nothing known (the `model` metadata hint is then the current model).
 */
export function listModels(state: AgentSessionState | undefined, hint: unknown): ModelList {
  const option = selectOption(state, "model");
  if (option) {
    return {
      currentModelId: typeof option.currentValue === "string" ? option.currentValue : null,
      availableModels: choices(option).flatMap((c) => modelInfo(c.value, c.name, c.description) ?? []),
    };
  }
  const models = state?.models;
  if (models) {
    const available = Array.isArray(models.availableModels) ? models.availableModels.filter(isObject) : [];
    return {
      currentModelId: typeof models.currentModelId === "string" ? models.currentModelId : null,
      availableModels: available.flatMap((m) => modelInfo(m.modelId, m.name, m.description) ?? []),
    };
  }
  return { currentModelId: typeof hint === "string" ? hint : null, availableModels: [] };
}

/** The session's current mode as the agent reported it (`modes`, else its `mode` config option). */
export function currentMode(state: AgentSessionState | undefined): string | null {
  const fromModes = state?.modes?.currentModeId;
  if (typeof fromModes === "string") return fromModes;
  const option = selectOption(state, "mode");
  return typeof option?.currentValue === "string" ? option.currentValue : null;
}

/** The current value of a `model` or `mode` key as the agent reported it, null when unknown. */
export function currentValue(state: AgentSessionState | undefined, key: "model" | "mode"): string | null {
  return key === "model" ? listModels(state, undefined).currentModelId : currentMode(state);
}

/**
 * Stored metadata as clients see it (`session/list`, `set_metadata`'s answer): `model` and `mode`
 * are what the agent reports now when it reports them, else the stored hint.
 */
export function effectiveMetadata(
  metadata: Record<string, unknown>,
  state: AgentSessionState | undefined,
): Record<string, unknown> {
  const effective = { ...metadata };
  for (const key of ["model", "mode"] as const) {
    const current = currentValue(state, key);
    if (current !== null) effective[key] = current;
  }
  return effective;
}

/** The ACP request that switches the agent to `value` for a `model` or `mode` key, if the agent offers one. */
export function switchRequest(
  state: AgentSessionState | undefined,
  sessionId: string,
  key: "model" | "mode",
  value: string,
): { method: string; params: Record<string, unknown> } | undefined {
  // Stable ACP methods first: set_mode for modes; for models only the config option is stable.
  if (key === "mode" && state?.modes)
    return { method: "session/set_mode", params: { sessionId, modeId: value } };
  const option = selectOption(state, key);
  if (option)
    return { method: "session/set_config_option", params: { sessionId, configId: option.id, value } };
  if (key === "model" && state?.models)
    return { method: "session/set_model", params: { sessionId, modelId: value } };
  return undefined;
}

/** Records what a successful switch request changed. */
export function absorbSwitch(
  state: AgentSessionState,
  method: string,
  params: Record<string, unknown>,
  result: unknown,
): void {
  if (method === "session/set_config_option" && isObject(result) && Array.isArray(result.configOptions)) {
    state.configOptions = result.configOptions;
  } else if (method === "session/set_model" && state.models) {
    state.models = { ...state.models, currentModelId: params.modelId };
  } else if (method === "session/set_mode" && state.modes) {
    state.modes = { ...state.modes, currentModeId: params.modeId };
  }
}
