// Loaded with `node --import` into a server under test: records the URL of every module the
// server imports, one per line, in the file named by $MODULE_LOG_FILE.
import { appendFileSync } from "node:fs";
import { register } from "node:module";

type NextResolve = (specifier: string, context: unknown) => Promise<{ url: string }>;

const file = process.env.MODULE_LOG_FILE;

/** The loader hook (runs on the loader thread, which registers it from the main thread below). */
export async function resolve(specifier: string, context: unknown, next: NextResolve) {
  const result = await next(specifier, context);
  if (file) appendFileSync(file, `${result.url}\n`);
  return result;
}

// The main thread registers this same file as the hooks module; the loader thread only uses `resolve`.
if (file && !("__moduleLogHooks" in globalThis)) {
  Object.assign(globalThis, { __moduleLogHooks: true });
  register(import.meta.url);
}
