import { builtinModule } from "./builtin-module.js";
import { withDefaultV8Flags } from "./server-v8-flags.js";

/**
 * Node built-ins that an idle server never needs, loaded on first use: each one imported at start
 * costs start-up time and memory (its module, its bindings, and the allocations that push start-up
 * past the young generation's first scavenge, after which both semi-spaces stay resident). They
 * load with V8's default flags, so from Node's code cache (server-v8-flags.ts).
 */
let crypto: typeof import("node:crypto") | undefined;
let zlib: typeof import("node:zlib") | undefined;
let perfHooks: typeof import("node:perf_hooks") | undefined;

/**
 * `node:crypto`: it brings OpenSSL's set-up (~1 MiB of memory and a few ms). Its users (ids of new
 * connections and processes, tickets, the token check) call it when they run.
 */
export function nodeCrypto(): typeof import("node:crypto") {
  return (crypto ??= withDefaultV8Flags(() => builtinModule<typeof import("node:crypto")>("node:crypto")));
}

/** `zlib.crc32` (the event log's frame checksum): `node:zlib` and its binding load with the first frame. */
export function crc32(data: Uint8Array, value?: number): number {
  return (zlib ??= withDefaultV8Flags(() => builtinModule<typeof import("node:zlib")>("node:zlib"))).crc32(
    data,
    value,
  );
}

/**
 * `node:perf_hooks` (nine modules, ~0.3 MiB): the young generation's cap watches garbage collections
 * with it from the server's first piece of work on (`young-generation.ts`), not on an idle server.
 */
export function nodePerfHooks(): typeof import("node:perf_hooks") {
  return (perfHooks ??= withDefaultV8Flags(() =>
    builtinModule<typeof import("node:perf_hooks")>("node:perf_hooks"),
  ));
}
