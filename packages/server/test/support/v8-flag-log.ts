// Loaded with `node --import` into a server under test (after module-log.ts): appends each V8 flag
// the server sets, as a line `flag FLAG`, to the file named by $MODULE_LOG_FILE, so that the log
// shows which modules had loaded when it set it. Under `node --expose-internals` each flag line is
// followed by `loaded NAME…`, the built-in modules loaded since the previous flag, and `uncached
// NAME…`, those compiled so far without Node's code cache (refused while a flag differs from
// Node's build, server-v8-flags.ts). It loads `node:v8` at start, which the server itself does
// not: use it only where that does not matter.
import { appendFileSync } from "node:fs";
import { createRequire } from "node:module";
import v8 from "node:v8";

interface BuiltinsBinding {
  getCacheUsage(): { compiledWithoutCache: Set<string> };
}

const file = process.env.MODULE_LOG_FILE;
const setFlags = v8.setFlagsFromString.bind(v8);
/** Node's own binding for built-in modules (what its code-cache tests read), with --expose-internals. */
const builtins: BuiltinsBinding | undefined = process.execArgv.includes("--expose-internals")
  ? (
      createRequire(import.meta.url)("internal/test/binding") as {
        internalBinding(name: "builtins"): BuiltinsBinding;
      }
    ).internalBinding("builtins")
  : undefined;

/** Built-in modules loaded so far (`process.moduleLoadList`, read by Node's own tests; not in @types/node). */
const loadedBuiltins = (): string[] =>
  (process as unknown as { moduleLoadList: string[] }).moduleLoadList
    .filter((entry) => entry.startsWith("NativeModule "))
    .map((entry) => entry.slice("NativeModule ".length));
let logged = new Set(loadedBuiltins());

v8.setFlagsFromString = (flag: string): void => {
  setFlags(flag);
  let line = `flag ${flag}\n`;
  if (builtins) {
    const loaded = loadedBuiltins();
    line += `loaded ${loaded.filter((name) => !logged.has(name)).join(" ")}\n`;
    line += `uncached ${[...builtins.getCacheUsage().compiledWithoutCache].join(" ")}\n`;
    logged = new Set(loaded);
  }
  if (file) appendFileSync(file, line);
};
