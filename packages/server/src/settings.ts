import { mkdirSync, statSync } from "node:fs";
import path from "node:path";
import type { ConfigFile } from "./config.js";
import { defaultDataDir } from "./data-dir.js";
import type { LogFormat, LogLevel } from "./log.js";

/**
 * The server settings that can come from a flag, an environment variable or a key of the config
 * file, in that order of precedence (flag > env > config > default). One table, read by the
 * argument parser, the resolver below and `--help`.
 */
export const SETTINGS = {
  host: { flag: "host", short: "H", env: "SANDBOX_AGENT_HOST", key: "host" },
  port: { flag: "port", short: "p", env: "SANDBOX_AGENT_PORT", key: "port" },
  token: { flag: "token", short: "t", env: "SANDBOX_AGENT_TOKEN", key: "token" },
  config: { flag: "config", short: "c", env: "SANDBOX_AGENT_CONFIG", key: undefined },
  defaultAgent: {
    flag: "default-agent",
    short: "a",
    env: "SANDBOX_AGENT_DEFAULT_AGENT",
    key: "defaultAgent",
  },
  workdir: { flag: "workdir", short: "w", env: "SANDBOX_AGENT_WORKDIR", key: "workdir" },
  fsRoot: { flag: "fs-root", short: undefined, env: "SANDBOX_AGENT_FS_ROOT", key: "fsRoot" },
  dataDir: { flag: "data-dir", short: "d", env: "SANDBOX_AGENT_DATA_DIR", key: "dataDir" },
  logLevel: { flag: "log-level", short: "l", env: "SANDBOX_AGENT_LOG_LEVEL", key: "logLevel" },
  logFormat: { flag: "log-format", short: undefined, env: "SANDBOX_AGENT_LOG_FORMAT", key: "logFormat" },
  allowClientEnv: {
    flag: "allow-client-env",
    short: undefined,
    env: "SANDBOX_AGENT_ALLOW_CLIENT_ENV",
    key: "allowClientEnv",
  },
  youngGenerationMiB: {
    flag: "young-generation-mib",
    short: undefined,
    env: "SANDBOX_AGENT_YOUNG_GENERATION_MIB",
    key: "youngGenerationMiB",
  },
} as const satisfies Record<
  string,
  { flag: string; short: string | undefined; env: string; key: keyof ConfigFile | undefined }
>;

export type SettingName = keyof typeof SETTINGS;

/** `parseArgs` options for the settings: strings, `allow-client-env` repeatable. */
export function settingOptions(): Record<string, { type: "string"; short?: string; multiple?: boolean }> {
  return Object.fromEntries(
    Object.entries(SETTINGS).map(([name, s]) => [
      s.flag,
      {
        type: "string" as const,
        ...(s.short !== undefined ? { short: s.short } : {}),
        ...(name === "allowClientEnv" ? { multiple: true } : {}),
      },
    ]),
  );
}

/** A value and where it came from (`--port`, `$SANDBOX_AGENT_PORT`, `config port`), for error messages. */
export interface Picked<T> {
  value: T;
  from: string;
}

export type UsageError = (message: string) => never;

export interface SettingSources {
  flags: Record<string, unknown>;
  env: NodeJS.ProcessEnv;
  config: ConfigFile;
  /** Directory of the config file: relative paths in it are relative to it. */
  configDir: string | undefined;
}

/** The config file named by `--config` or `$SANDBOX_AGENT_CONFIG`, if any. */
export function configFileOf(flags: Record<string, unknown>, env: NodeJS.ProcessEnv): string | undefined {
  const flag = flags[SETTINGS.config.flag];
  if (typeof flag === "string") return flag;
  return env[SETTINGS.config.env] || undefined;
}

/** Reads settings by precedence; an empty environment variable counts as unset (the token excepted). */
export class Settings {
  constructor(
    private readonly sources: SettingSources,
    private readonly fail: UsageError,
  ) {}

  /** The raw value: a flag's string, an environment variable's text, or the config key's value. */
  pick(name: SettingName): Picked<unknown> | undefined {
    const setting = SETTINGS[name];
    const flag = this.sources.flags[setting.flag];
    if (flag !== undefined) return { value: flag, from: `--${setting.flag}` };
    const env = this.sources.env[setting.env];
    if (env !== undefined && (env !== "" || name === "token")) return { value: env, from: `$${setting.env}` };
    const value = setting.key === undefined ? undefined : this.sources.config[setting.key];
    return value === undefined ? undefined : { value, from: `config ${setting.key}` };
  }

  string(name: SettingName): Picked<string> | undefined {
    const picked = this.pick(name);
    if (picked === undefined) return undefined;
    if (typeof picked.value !== "string") this.fail(`${picked.from} must be a string`);
    return picked as Picked<string>;
  }

  /** A path, resolved against the config file's directory when it comes from the config. */
  path(name: SettingName): Picked<string> | undefined {
    const picked = this.string(name);
    if (picked === undefined) return undefined;
    const base = picked.from.startsWith("config") ? (this.sources.configDir ?? process.cwd()) : process.cwd();
    return { value: path.resolve(base, picked.value), from: picked.from };
  }

  port(): number {
    return this.integer("port", DEFAULT_PORT, 65535, "a port (0 to 65535; 0 picks a free one)");
  }

  /** An integer setting from 0 to `max`, or `fallback`; `what` names a valid value for the error. */
  private integer(name: SettingName, fallback: number, max: number, what: string): number {
    const picked = this.pick(name);
    if (picked === undefined) return fallback;
    const value = typeof picked.value === "number" ? picked.value : Number(picked.value);
    if (!Number.isInteger(value) || value < 0 || value > max || picked.value === "")
      this.fail(`${picked.from} ${String(picked.value)} is not ${what}`);
    return value;
  }

  /** The token, refusing an empty one: an empty token would silently mean "no authentication". */
  token(): string | undefined {
    const picked = this.string("token");
    if (picked !== undefined && picked.value === "")
      this.fail(`${picked.from} is empty: give a token, or leave it out to run without one`);
    return picked?.value;
  }

  oneOf<T extends string>(name: SettingName, allowed: readonly T[], fallback: T): T {
    const picked = this.string(name);
    if (picked === undefined) return fallback;
    if (!allowed.includes(picked.value as T))
      this.fail(`${picked.from} ${picked.value} is not one of ${allowed.join(", ")}`);
    return picked.value as T;
  }

  /** A list: repeated flags or comma-separated text, else the config's array. */
  list(name: SettingName): string[] {
    const picked = this.pick(name);
    if (picked === undefined) return [];
    const items = Array.isArray(picked.value) ? (picked.value as string[]) : [String(picked.value)];
    return items
      .flatMap((item) => item.split(","))
      .map((item) => item.trim())
      .filter(Boolean);
  }

  logLevel(): LogLevel {
    return this.oneOf("logLevel", ["debug", "info", "warn", "error"], "info");
  }

  logFormat(): LogFormat {
    return this.oneOf("logFormat", ["text", "json"], "text");
  }

  /** Where V8's young generation stops growing (`capYoungGeneration`), MiB; 0 leaves it to V8. */
  youngGenerationMiB(fallback: number): number {
    return this.integer(
      "youngGenerationMiB",
      fallback,
      Infinity,
      "a size in MiB (an integer, 0 for V8's own)",
    );
  }

  dataDir(): string {
    return this.path("dataDir")?.value ?? defaultDataDir({ ...this.sources.env, SANDBOX_AGENT_DATA_DIR: "" });
  }
}

export const DEFAULT_PORT = 2468;

/**
 * The agents' working directory: the one given, which must be an existing directory, else
 * `<data-dir>/workspace`, created when missing. Never the server's own working directory: started
 * from a clone, that would let agents and the file API write into the repository.
 */
export function resolveWorkdir(given: Picked<string> | undefined, dataDir: string, fail: UsageError): string {
  if (given !== undefined) return existingDirectory(given, fail);
  const workdir = path.join(dataDir, "workspace");
  try {
    mkdirSync(workdir, { recursive: true });
  } catch (error) {
    fail(`cannot create the default workdir ${workdir} (${(error as Error).message}): pass --workdir DIR`);
  }
  return workdir;
}

/** `given.value` if it is an existing directory; else a usage error naming where it came from. */
export function existingDirectory(given: Picked<string>, fail: UsageError): string {
  const stat = statSync(given.value, { throwIfNoEntry: false });
  if (stat === undefined) fail(`${given.from} ${given.value} does not exist: create it first`);
  if (!stat.isDirectory()) fail(`${given.from} ${given.value} is not a directory`);
  return given.value;
}
