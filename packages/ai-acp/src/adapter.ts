import { SandboxCapability } from "@sandbox-agent/ai-sandbox";
import {
  EventType,
  type AdapterYieldChunk,
  type CapabilityHandle,
  type DefaultMessageMetadataByModality,
  type TextOptions,
} from "@tanstack/ai";
import {
  BaseTextAdapter,
  type StructuredOutputOptions,
  type StructuredOutputResult,
} from "@tanstack/ai/adapters";
import type { AcpCompatibleConfig, AcpModelOptions } from "./config.js";
import { AcpHarnessError } from "./errors.js";
import { HarnessRunner } from "./runner.js";

/** Prompts are text plus, where the agent advertises it, images. */
export type AcpInputModalities = readonly ["text", "image"];

/** The chat() adapter for one model of an ACP harness. */
export class AcpTextAdapter<TModel extends string, TOptions extends object> extends BaseTextAdapter<
  TModel,
  AcpModelOptions<TOptions>,
  AcpInputModalities,
  DefaultMessageMetadataByModality
> {
  readonly name: string;
  override readonly requires: ReadonlyArray<CapabilityHandle> = [SandboxCapability];

  constructor(
    private readonly runner: HarnessRunner,
    name: string,
    model: TModel,
  ) {
    super(undefined, model);
    this.name = name;
  }

  /** The schema rides in the prompt of the same turn; the agent's tools keep running. */
  supportsCombinedToolsAndSchema(): boolean {
    return true;
  }

  /** The adapter emits `structured-output.complete` itself; the engine must not parse prose. */
  combinedStructuredOutputSource(): "event" {
    return "event";
  }

  /** Stops the warm agent processes of this adapter's harness. */
  dispose(): Promise<void> {
    return this.runner.pool.closeAll();
  }

  chatStream(options: TextOptions<AcpModelOptions<TOptions>>): AsyncIterable<AdapterYieldChunk> {
    return this.runner.run(this.model, options);
  }

  /** Direct (non-streaming) structured output: one turn with the schema, collected. */
  async structuredOutput(
    options: StructuredOutputOptions<AcpModelOptions<TOptions>>,
  ): Promise<StructuredOutputResult<unknown>> {
    const chatOptions = { ...options.chatOptions, outputSchema: options.outputSchema };
    for await (const chunk of this.runner.run(this.model, chatOptions)) {
      if (chunk.type === EventType.RUN_ERROR) throw new AcpHarnessError("prompt_failed", chunk.message);
      if (chunk.type === EventType.CUSTOM && chunk.name === "structured-output.complete") {
        const value = chunk.value as { object: unknown; raw: string };
        return { data: value.object, rawText: value.raw };
      }
    }
    throw new AcpHarnessError("prompt_failed", `${this.name}: the turn ended without structured output`);
  }
}

/** A configured harness: pick a model per call. `dispose()` stops every warm agent process. */
export interface AcpHarness<TModel extends string, TOptions extends object> {
  (model: TModel): AcpTextAdapter<TModel, TOptions>;
  dispose(): Promise<void>;
}

/**
 * Configures an ACP harness once and returns `(model) => adapter`. With
 * `models` declared, unknown model ids are a compile-time error.
 */
export function acpCompatible<
  const TModels extends ReadonlyArray<string> = ReadonlyArray<string>,
  TOptions extends object = Record<never, never>,
>(config: AcpCompatibleConfig<TModels, TOptions>): AcpHarness<TModels[number], TOptions> {
  validate(config);
  // The runner only passes the config's callbacks values of the declared types; erase the generics once here.
  const runner = new HarnessRunner(config as unknown as AcpCompatibleConfig<ReadonlyArray<string>, object>);
  const harness = (model: TModels[number]): AcpTextAdapter<TModels[number], TOptions> => {
    if (config.models && !config.models.includes(model)) {
      throw new AcpHarnessError(
        "config",
        `${config.name}: unknown model "${model}" (declared: ${config.models.join(", ")})`,
      );
    }
    return new AcpTextAdapter<TModels[number], TOptions>(runner, config.name, model);
  };
  return Object.assign(harness, { dispose: () => runner.pool.closeAll() });
}

/** One-shot form: `acpCompatibleText(model, config)` = `acpCompatible(config)(model)`. */
export function acpCompatibleText<TModel extends string, TOptions extends object = Record<never, never>>(
  model: TModel,
  config: AcpCompatibleConfig<ReadonlyArray<TModel>, TOptions>,
): AcpTextAdapter<TModel, TOptions> {
  // Cached per config object so a module-level config keeps its warm agents across chat() calls.
  let harness = oneShotHarnesses.get(config) as unknown as AcpHarness<TModel, TOptions> | undefined;
  if (!harness) {
    harness = acpCompatible(config);
    oneShotHarnesses.set(config, harness as unknown as AcpHarness<string, object>);
  }
  return harness(model);
}

const oneShotHarnesses = new WeakMap<object, AcpHarness<string, object>>();

function validate(config: { name: string }): void {
  if (!config.name) throw new AcpHarnessError("config", "acpCompatible: `name` is required");
}
