/**
 * A configuration the server cannot run with (an unreadable or invalid config file, an agent entry
 * that names nothing): the CLI prints its message and exits 2. Kept apart from `config.ts` so that
 * modules loaded at start can throw it without loading zod.
 */
export class ConfigError extends Error {
  override name = "ConfigError";
}
