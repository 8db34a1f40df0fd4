#!/usr/bin/env node
// Benchmark: the cost of `isolate: "bwrap"` for the local-process sandbox, against plain host
// processes measured in the same run (interleaved, so load on the machine hits both alike).
//   node bench/sandbox-spawn.mjs [--quick] [--json]
import { defineSandbox, localProcessSandbox } from "@sandbox-agent/ai-sandbox";
import { benchArgs } from "./common.mjs";

const args = benchArgs(import.meta.url, { quick: { type: "boolean" } });
const quick = args.quick;
const asJson = args.json;
const SPAWNS = quick ? 50 : 300;
const CREATES = quick ? 5 : 20;

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const p90 = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length * 0.9)];
const log = (...a) => !asJson && console.error(...a);

/** ms from `spawn("true")` to its exit, stdout drained. */
async function spawnTrue(instance) {
  const start = performance.now();
  const proc = await instance.spawn("true");
  await proc.stdin.close();
  for await (const _ of proc.stdout);
  await proc.exited;
  return performance.now() - start;
}

/** ms for `start()` of a fresh sandbox (temp dirs; with bwrap also the probe run) and its disposal. */
async function createOnce(isolate, i) {
  const sandbox = defineSandbox({ id: `bench-${isolate}-${i}`, provider: localProcessSandbox({ isolate }) });
  const start = performance.now();
  await sandbox.start();
  const took = performance.now() - start;
  await sandbox.dispose();
  return took;
}

const modes = ["none", "bwrap"];
const instances = {};
for (const isolate of modes) {
  instances[isolate] = await defineSandbox({
    id: `bench-${isolate}`,
    provider: localProcessSandbox({ isolate }),
  }).start();
  for (let i = 0; i < 10; i++) await spawnTrue(instances[isolate]); // warm-up
}
const spawns = { none: [], bwrap: [] };
const creates = { none: [], bwrap: [] };
log(`${SPAWNS} spawns of \`true\` per mode, interleaved…`);
for (let i = 0; i < SPAWNS; i++)
  for (const isolate of modes) spawns[isolate].push(await spawnTrue(instances[isolate]));
log(`${CREATES} sandbox creations per mode, interleaved…`);
for (let i = 0; i < CREATES; i++)
  for (const isolate of modes) creates[isolate].push(await createOnce(isolate, i));
await Promise.all(modes.map((isolate) => instances[isolate].dispose()));

const row = (values) => ({ median: +median(values).toFixed(2), p90: +p90(values).toFixed(2) });
const result = {
  spawnTrue: { none: row(spawns.none), bwrap: row(spawns.bwrap) },
  create: { none: row(creates.none), bwrap: row(creates.bwrap) },
};
result.spawnTrue.overheadMs = +(result.spawnTrue.bwrap.median - result.spawnTrue.none.median).toFixed(2);
result.spawnTrue.ratio = +(result.spawnTrue.bwrap.median / result.spawnTrue.none.median).toFixed(2);
result.create.overheadMs = +(result.create.bwrap.median - result.create.none.median).toFixed(2);

if (asJson) console.log(JSON.stringify(result, null, 2));
else {
  console.log("| metric | plain | bwrap | overhead |");
  console.log("| --- | --- | --- | --- |");
  const line = (name, r) =>
    console.log(
      `| ${name} median / p90 (ms) | ${r.none.median} / ${r.none.p90} | ${r.bwrap.median} / ${r.bwrap.p90} | +${r.overheadMs} ms${r.ratio ? ` (×${r.ratio})` : ""} |`,
    );
  line(`spawn \`true\` → exit (${SPAWNS} each)`, result.spawnTrue);
  line(`sandbox start() (${CREATES} each)`, result.create);
}
