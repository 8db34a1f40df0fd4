import { createRequire } from "node:module";

let cjsRequire: NodeJS.Require | undefined;

/**
 * A Node built-in module, loaded when this is called: `process.getBuiltinModule` (Node 20.16+);
 * before it, `require` from a CommonJS loader made on first use (`createRequire` costs ~1 ms of
 * start-up: bench/README.md, Start path). For built-ins the start path does without
 * (`lazy-builtins.ts`, `server-v8-flags.ts`).
 */
export function builtinModule<T>(id: string): T {
  return ((process.getBuiltinModule as typeof process.getBuiltinModule | undefined)?.(id) ??
    (cjsRequire ??= createRequire(import.meta.url))(id)) as T;
}
