import { builtinModule } from "./builtin-module.js";

let v8: typeof import("node:v8") | undefined;

/**
 * `node:v8`, loaded with the server's first flag: its modules and bindings (heap utilities,
 * serializer, profiler) are start-up time an idle server does without.
 */
export function nodeV8(): typeof import("node:v8") {
  return (v8 ??= builtinModule<typeof import("node:v8")>("node:v8"));
}

function setFlagsFromString(flag: string): void {
  nodeV8().setFlagsFromString(flag);
}

/**
 * V8 optimizes a function once it ran about this many bytes of bytecode (its default is 67,584).
 * A server runs the same request path over and over: with the default, requests 500 to 1,500 of a
 * connection still ran partly unoptimized (~650 µs of CPU per echo turn there, ~300 µs once warm);
 * with this budget ~400–500 µs, for about 1 MiB more RSS and no slower start. The price: more
 * compilation during a connection's first few hundred requests, whose p99 latency rose (median of 5
 * runs at load 4–7: 8.2 → 13.4 ms; p50 about the same) on this 2-core machine, where the compiler
 * threads compete with the request path. See bench/README.md, "Rust peer". Set at run time so that
 * every entry (the bin, the bundle, dist/) gets it.
 */
const INTERRUPT_BUDGET = "--interrupt-budget=8000";

/**
 * TurboFan inlines no callee of more than this many bytes of bytecode (its default is 460). A
 * connection's first requests are mostly TurboFan compiling the request path (~130 jobs, ours and
 * Node's streams/http code), and every job filled V8's cumulative inlining budget (920 bytes) with
 * callees of up to 460 bytes each: graph to build and optimise, for a call saved per large callee.
 * Under this cap the small callees are still inlined and the large ones are called: callgrind
 * (all threads, a fresh server's turns 1–500 / 501–1,500 / 1,501–2,500) counted 15–20 % fewer
 * compiler instructions over the 2,500 turns and the same outside the compiler in the steady
 * turns (within ±4 %, as between runs); interleaved, ~10 % less CPU over the first 500 turns (the
 * compiler threads) and 4–9 % over 501–1,500. The cumulative budget at 460 instead, or this cap at 180, cut the compile
 * work about as much but left turns 501–1,500 slower on the main thread; at 120 and below the
 * optimised code ran more instructions. See bench/README.md, "V8 inlining caps".
 */
const INLINING_CAP = "--max-inlined-bytecode-size=230";

/**
 * V8's own values of the flags the server sets (Node 20's V8; `node --v8-options` lists them): every
 * flag the server sets needs its default here, or built-ins loaded after it lose the code cache
 * (test/startup.test.ts, "the server's V8 flags", checks that they do not).
 */
const DEFAULT_FLAGS: Record<string, string> = {
  "--interrupt-budget": "--interrupt-budget=67584",
  "--max-inlined-bytecode-size": "--max-inlined-bytecode-size=460",
  "--semi-space-growth-factor": "--semi-space-growth-factor=2",
};

/** The flags the server has set, in order. */
const serverFlags: string[] = [];

function setServerFlag(flag: string): void {
  setFlagsFromString(flag);
  serverFlags.push(flag);
}

/**
 * Sets the server's V8 flags. Call it once the server listens: V8 refuses Node's code cache for
 * built-in modules compiled while any flag differs from the one Node's build used (the cache carries
 * a hash of the flags), so a built-in loaded after this compiles from source, several times slower
 * (`dns` and `cluster`, which `listen()` loads: ~2 → ~10 ms; `node:crypto` ~4 → ~15 ms). The
 * command sets them once connections' one-time imports have loaded
 * (`ServerOptions.onConnectionCodeLoaded`): the budget and the inlining cap are for the request
 * path of connections, an idle server does not load `node:v8`, and under this budget the ~30
 * `path.resolve` calls of those imports' module resolution made `path`'s normalizeString hot (it
 * ran for start-up's imports too) and cost a TurboFan job in the first connection's window for a
 * function its requests never call.
 */
export function setServerV8Flags(): void {
  setServerFlag(INTERRUPT_BUDGET);
  setServerFlag(INLINING_CAP);
}

/** Stops V8's young generation growing past its size now (see `young-generation.ts`). */
export function stopYoungGenerationGrowth(): void {
  setServerFlag("--semi-space-growth-factor=1");
}

/**
 * Runs `load` (a `require` of built-in modules) with V8's default flags, so that they compile from
 * Node's code cache, then sets the server's flags again. Only the flag hash matters to the cache; the
 * budget of functions already running is kept (a TurboFan job running on its thread meanwhile may
 * read the default inlining cap: it only inlines more).
 */
export function withDefaultV8Flags<T>(load: () => T): T {
  if (serverFlags.length === 0) return load();
  for (const flag of serverFlags) setFlagsFromString(DEFAULT_FLAGS[flag.slice(0, flag.indexOf("="))]!);
  try {
    return load();
  } finally {
    for (const flag of serverFlags) setFlagsFromString(flag);
  }
}
