import { readFileSync } from "node:fs";
import { z } from "zod";
import type { AgentConfigEntry, AgentSpec } from "./agents/types.js";
import { ConfigError } from "./config-error.js";
import { DEFAULT_PROCESS_LIMITS, type ProcessLimits } from "./processes/limits.js";
import { LIMIT_NAMES, type RuntimeLimits } from "./runtime/options.js";
import type { EventLogOptions } from "./store/event-store.js";

const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "not a variable name");

const agentEntrySchema = z
  .strictObject({
    command: z.string().min(1).optional(),
    args: z.array(z.string()).optional(),
    env: z.record(z.string(), z.string()).optional(),
    passEnv: z.array(envName).optional(),
    /** Variables clients may set in `initialize` (`"*"`: any name), besides `passEnv`. */
    clientEnv: z.array(z.union([envName, z.literal("*")])).optional(),
    cwd: z.string().optional(),
  })
  .refine((entry) => entry.command !== undefined || entry.args === undefined, {
    message: '"args" needs a "command" (an entry without one adjusts the built-in agent of that id)',
    path: ["args"],
  }) satisfies z.ZodType<AgentConfigEntry>;

const limitsSchema = z.strictObject(
  Object.fromEntries(LIMIT_NAMES.map((k) => [k, z.number().int().positive().optional()])) as {
    [K in keyof RuntimeLimits]: z.ZodOptional<z.ZodNumber>;
  },
);

const processLimitsSchema = z.strictObject(
  Object.fromEntries(
    Object.keys(DEFAULT_PROCESS_LIMITS).map((k) => [k, z.number().int().positive().optional()]),
  ) as { [K in keyof ProcessLimits]: z.ZodOptional<z.ZodNumber> },
);

const eventLogSchema = z.strictObject({
  inMemory: z.boolean().optional(),
  fsync: z.boolean().optional(),
  fsyncIntervalMs: z.number().int().nonnegative().optional(),
  segmentBytes: z.number().int().positive().optional(),
  retentionBytes: z.number().int().positive().optional(),
  retentionMs: z.number().int().positive().optional(),
  windowBytes: z.number().int().nonnegative().optional(),
}) satisfies z.ZodType<Partial<EventLogOptions>>;

/**
 * The `--config FILE` format. Unknown keys are rejected so typos don't pass silently. The server
 * settings (`host` … `logFormat`) come after flags and environment variables: flag > env > config.
 */
export const configFileSchema = z.strictObject({
  host: z.string().min(1).optional(),
  port: z.number().int().min(0).max(65535).optional(),
  /** Prefer `$SANDBOX_AGENT_TOKEN`; a config file holding a token should be readable by the server's user only. */
  token: z.string().min(1).optional(),
  /** Relative paths are relative to the config file's directory. */
  workdir: z.string().min(1).optional(),
  fsRoot: z.string().min(1).optional(),
  dataDir: z.string().min(1).optional(),
  logLevel: z.enum(["debug", "info", "warn", "error"]).optional(),
  logFormat: z.enum(["text", "json"]).optional(),
  /** Variables every agent accepts from clients (same as `--allow-client-env`). */
  allowClientEnv: z.array(z.union([envName, z.literal("*")])).optional(),
  agents: z.record(z.string().regex(/^[a-z0-9][a-z0-9._-]*$/i), agentEntrySchema).optional(),
  defaultAgent: z.string().optional(),
  /** Install a missing built-in agent on `initialize` (same as `--auto-install`). */
  autoInstall: z.boolean().optional(),
  allowedOrigins: z.array(z.string()).optional(),
  allowedHosts: z.array(z.string()).optional(),
  limits: limitsSchema.optional(),
  /** Limits of the process API (`/v2/processes`). */
  processes: processLimitsSchema.optional(),
  /** The event log (see the README's "Durable connections"). */
  eventLog: eventLogSchema.optional(),
  /** Where the command stops V8's young generation growing, MiB (0: V8's own maximum); see `capYoungGeneration`. */
  youngGenerationMiB: z.number().int().nonnegative().optional(),
});

export type ConfigFile = z.infer<typeof configFileSchema>;

export function loadConfigFile(file: string): ConfigFile {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new ConfigError(`Cannot read config file ${file}: ${(error as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`Config file ${file} is not valid JSON: ${(error as Error).message}`);
  }
  const parsed = configFileSchema.safeParse(json);
  if (!parsed.success) {
    const issues = parsed.error.issues
      .map((i) => `  ${i.path.join(".") || "(root)"}: ${i.message}`)
      .join("\n");
    throw new ConfigError(`Invalid config file ${file}:\n${issues}`);
  }
  return parsed.data;
}

/** `loadConfigFile`, with a config error reported through `usageError` (the CLI's exit 2). */
export function loadConfigOr(file: string, usageError: (message: string) => never): ConfigFile {
  try {
    return loadConfigFile(file);
  } catch (error) {
    if (error instanceof ConfigError) usageError(error.message);
    throw error;
  }
}

export { ConfigError };
export type { AgentSpec };
