// Loaded with `node --import` into a server under test: records the URL of every module the
// server imports, one per line, in the file named by $MODULE_LOG_FILE. Built-ins loaded with
// `require` (lazy-builtins.ts) pass no loader hook: on SIGUSR2 it writes every built-in module
// loaded so far (`node:NAME`, internal ones too) to $MODULE_LOG_FILE.builtins, then a line `end`.
import { appendFileSync, writeFileSync } from "node:fs";
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
  process.on("SIGUSR2", () => {
    // Undocumented but long-standing (Node's own tests read it); not in @types/node.
    const { moduleLoadList } = process as unknown as { moduleLoadList: string[] };
    const builtins = moduleLoadList
      .filter((entry) => entry.startsWith("NativeModule "))
      .map((entry) => `node:${entry.slice("NativeModule ".length)}\n`);
    writeFileSync(`${file}.builtins`, `${builtins.join("")}end\n`);
  });
}
