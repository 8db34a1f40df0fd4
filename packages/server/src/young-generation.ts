import { nodePerfHooks } from "./lazy-builtins.js";
import { nodeV8, stopYoungGenerationGrowth } from "./server-v8-flags.js";

/**
 * Where the `sandbox-agent server` command stops V8's young generation growing (MiB, config
 * `youngGenerationMiB`; 0 leaves it to V8). Chosen by `bench/event-log.mjs` and `bench/run.mjs`
 * (bench/README.md, Event log on disk): see `capYoungGeneration`.
 */
export const DEFAULT_YOUNG_GENERATION_MIB = 8;

const MiB = 2 ** 20;

/**
 * Under a long stream V8 doubles its young generation up to its maximum (16 MiB semi-spaces on
 * 64-bit Node 20) and keeps it: RSS that is capacity, not data, and most of the server's growth
 * across a large turn. `--max-semi-space-size` would cap it, but it is a node option read only when
 * the heap is set up, so the command cannot set it on itself. V8 does read
 * `--semi-space-growth-factor` each time it grows the young generation: once a garbage collection
 * leaves it at `mib` or more, a factor of 1 stops it there. A process-wide flag, so it is the
 * command's to set, never `startServer`'s inside someone's app. The command arms it with the
 * server's first piece of work (`ServerOptions.onFirstWork`: before any stream), so that an idle
 * server does not load `node:perf_hooks` for the observer.
 */
export function capYoungGeneration(mib: number): void {
  if (mib <= 0) return;
  const observer = new (nodePerfHooks().PerformanceObserver)(() => {
    const young = nodeV8()
      .getHeapSpaceStatistics()
      .find((s) => s.space_name === "new_space");
    if (young === undefined || young.space_size < mib * MiB) return;
    stopYoungGenerationGrowth();
    observer.disconnect();
  });
  observer.observe({ entryTypes: ["gc"] });
}
