// Loaded into a server by `bench/event-log.mjs` (`node --import ./bench/memory-probe.mjs`) to say what
// its RSS is made of: on SIGUSR2 it writes one JSON line to the file named by
// $SANDBOX_AGENT_MEMORY_PROBE with `process.memoryUsage()` and V8's heap spaces (committed and used),
// now and at the highest RSS it saw since the previous report (sampled every 20 ms). The bench adds
// what only /proc shows (malloc's heap, anonymous mappings). No server code knows about it.
import { appendFileSync } from "node:fs";
import { PerformanceObserver } from "node:perf_hooks";
import v8 from "node:v8";

const file = process.env.SANDBOX_AGENT_MEMORY_PROBE;
const MiB = 2 ** 20;

function snapshot() {
  const m = process.memoryUsage();
  const spaces = {};
  for (const s of v8.getHeapSpaceStatistics())
    spaces[s.space_name.replace(/_space$/, "")] = {
      committed: s.physical_space_size / MiB,
      used: s.space_used_size / MiB,
    };
  return {
    rss: m.rss / MiB,
    heapCommitted: m.heapTotal / MiB,
    heapUsed: m.heapUsed / MiB,
    external: m.external / MiB,
    arrayBuffers: m.arrayBuffers / MiB,
    spaces,
  };
}

// $SANDBOX_AGENT_PROBE_YOUNG_MIB (bench `--cap-young MIB`): what the server command does itself
// (`--young-generation-mib`, packages/server/src/young-generation.ts), here for any process, the floor's too. `--max-semi-space-size` only counts when the heap is set up (on node's command line), but
// V8 reads `--semi-space-growth-factor` each time the young generation grows: once it reached
// MIB (after a GC, seen by a `gc` PerformanceObserver), a factor of 1 stops it there.
const capMiB = Number(process.env.SANDBOX_AGENT_PROBE_YOUNG_MIB ?? 0);
if (capMiB > 0) {
  const observer = new PerformanceObserver(() => {
    const young = v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space");
    if (young.space_size < capMiB * MiB) return;
    v8.setFlagsFromString("--semi-space-growth-factor=1");
    observer.disconnect();
  });
  observer.observe({ entryTypes: ["gc"] });
}

if (file) {
  let peak = snapshot();
  const sampler = setInterval(() => {
    if (process.memoryUsage.rss() / MiB > peak.rss) peak = snapshot();
  }, 20);
  sampler.unref();
  process.on("SIGUSR2", () => {
    const now = snapshot();
    appendFileSync(file, `${JSON.stringify({ now, peak: peak.rss >= now.rss ? peak : now })}\n`);
    peak = now;
  });
}
