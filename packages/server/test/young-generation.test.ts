import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

const moduleUrl = new URL("../src/young-generation.js", import.meta.url).href;

/**
 * The young generation's size (MiB) in a fresh Node process that called `capYoungGeneration(mib)`
 * and then made ~400 MiB of short-lived garbage, the way a long stream does: a process of its own,
 * since the cap is a process-wide V8 flag.
 */
function youngAfterGarbage(mib: number): number {
  const script = `
    import v8 from "node:v8";
    const { capYoungGeneration } = await import(${JSON.stringify(moduleUrl)});
    capYoungGeneration(${mib});
    // A ring of recent objects, as a stream keeps its newest events a while: survivors make V8 grow it.
    const ring = new Array(30000);
    let keep = 0;
    for (let round = 0; round < 400; round++) {
      // The PerformanceObserver reports after a GC, on the event loop: turns of ~1 MB, as a stream makes.
      await new Promise((resolve) => setImmediate(resolve));
      for (let i = 0; i < 2000; i++) ring[(round * 2000 + i) % ring.length] = new Array(64).fill(i);
      keep += ring.length;
    }
    const young = v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space");
    console.log(JSON.stringify({ mib: young.space_size / 2 ** 20, keep }));
  `;
  const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    encoding: "utf8",
    cwd: fileURLToPath(new URL(".", import.meta.url)),
    timeout: 60_000,
  });
  assert.equal(run.status, 0, run.stderr);
  return (JSON.parse(run.stdout) as { mib: number }).mib;
}

describe("capYoungGeneration", () => {
  it("stops the young generation growing once it reached the cap; without one it grows past it", () => {
    const uncapped = youngAfterGarbage(0);
    const capped = youngAfterGarbage(2);
    assert.ok(uncapped > 4, `uncapped young generation ${uncapped} MiB: the garbage made it grow`);
    assert.ok(capped <= 4, `capped at 2 MiB, the young generation is ${capped} MiB`);
  });
});
