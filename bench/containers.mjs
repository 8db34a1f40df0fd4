#!/usr/bin/env node
// Benchmark of the container sandbox (`dockerSandbox`) on a real engine, against a baseline taken
// in the same run: the engine starting a bare container of the same image that runs a minimal
// Node HTTP server (what any container sandbox pays before our server is involved).
//   node bench/containers.mjs [--quick] [--json] [--network host|slirp4netns|bridge]
// Needs DOCKER_HOST (or the default socket) and the test image (npm run image -w @sandbox-agent/sandbox-docker).
import Docker from "dockerode";
import { dockerSandbox } from "@sandbox-agent/sandbox-docker";
import { benchArgs } from "./common.mjs";

const values = benchArgs(import.meta.url, {
  quick: { type: "boolean" },
  network: { type: "string", default: "host" },
});
const IMAGE = process.env.SANDBOX_AGENT_TEST_IMAGE ?? "localhost/sandbox-agent-test:latest";
const ROUNDS = values.quick ? 5 : 15;
const CONCURRENT = 10;
const network = values.network;
const log = (...a) => !values.json && console.error(...a);
const host = process.env.DOCKER_HOST;
const docker = new Docker(host?.startsWith("unix://") ? { socketPath: host.slice(7) } : undefined);
const label = { "dev.sandboxagent.bench": String(process.pid) };
const provider = dockerSandbox({ image: IMAGE, network, pull: "never", labels: label });

const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};
const stats = (ms) => ({ p50: percentile(ms, 50), p90: percentile(ms, 90), min: Math.min(...ms) });
const round1 = (n) => Math.round(n * 10) / 10;

/** Baseline: create + start a bare container whose Node serves HTTP, until a request answers. */
async function bareContainer(port) {
  const started = performance.now();
  const container = await docker.createContainer({
    Image: IMAGE,
    Entrypoint: ["node"],
    Cmd: ["-e", `require("http").createServer((q, s) => s.end("ok")).listen(${port}, "127.0.0.1")`],
    Labels: label,
    HostConfig: { Init: true, NetworkMode: "host" },
  });
  await container.start();
  for (;;) {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(500) });
      await response.text();
      break;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 15));
    }
  }
  const ms = performance.now() - started;
  await container.remove({ force: true });
  return ms;
}

async function timed(work) {
  const started = performance.now();
  const result = await work();
  return [performance.now() - started, result];
}

/** RSS of the processes in a sandbox (the server; its Node binary's pages are shared between sandboxes), in MB. */
async function rssMb(instance) {
  const proc = await instance.spawn("ps -o rss= -C node");
  await proc.stdin.close();
  let out = "";
  for await (const chunk of proc.stdout) out += Buffer.from(chunk).toString();
  await proc.exited;
  return out.split("\n").reduce((sum, kb) => sum + (Number(kb) || 0), 0) / 1024;
}

/** Memory charged to a container's cgroup (what the engine reports, page cache left out), in MB. */
async function memoryMb(id) {
  const stats = await docker.getContainer(id).stats({ stream: false });
  const usage = stats.memory_stats?.usage ?? 0;
  const cache = stats.memory_stats?.stats?.cache ?? stats.memory_stats?.stats?.inactive_file ?? 0;
  return (usage - cache) / 1024 / 1024;
}

const results = {};
log(`image ${IMAGE}, network ${network}, ${ROUNDS} rounds`);
// Warm-up: the image's layers in the page cache, the bundle archive in memory.
await (await provider.create({ id: "bench-warmup", env: {} })).dispose();

const baseline = [];
const create = [];
for (let i = 0; i < ROUNDS; i++) {
  baseline.push(await bareContainer(20000 + ((process.pid + i) % 20000)));
  const [ms, instance] = await timed(() => provider.create({ id: `bench-${i}`, env: {} }));
  create.push(ms);
  await instance.dispose();
}
results.bareContainerMs = stats(baseline);
results.createToHealthyMs = stats(create);
log("create → healthy", results.createToHealthyMs, "bare container", results.bareContainerMs);

const keyed = dockerSandbox({
  image: IMAGE,
  network,
  pull: "never",
  labels: label,
  key: `bench-${process.pid}`,
});
const first = await keyed.create({ id: "bench-keyed", env: {} });
await first.markBootstrapped();
const reattach = [];
for (let i = 0; i < ROUNDS; i++) reattach.push((await timed(() => keyed.resume(`bench-${process.pid}`)))[0]);
const restart = [];
for (let i = 0; i < Math.min(ROUNDS, 8); i++) {
  await docker.getContainer(first.containerId).stop({ t: 1 });
  restart.push((await timed(() => keyed.resume(`bench-${process.pid}`)))[0]);
}
await keyed.destroy(`bench-${process.pid}`);
results.resumeRunningMs = stats(reattach);
results.resumeStoppedMs = stats(restart);
log("resume (running)", results.resumeRunningMs, "resume (stopped → started)", results.resumeStoppedMs);

const [concurrentMs, many] = await timed(() =>
  Promise.all(
    Array.from({ length: CONCURRENT }, (_, i) => provider.create({ id: `bench-many-${i}`, env: {} })),
  ),
);
results.concurrent = { sandboxes: CONCURRENT, ms: Math.round(concurrentMs) };
log(`${CONCURRENT} concurrent creates`, results.concurrent);
await new Promise((resolve) => setTimeout(resolve, 2000)); // let start-up garbage settle before sampling
const memory = await Promise.all(many.map((instance) => memoryMb(instance.containerId)));
const rss = await Promise.all(many.map((instance) => rssMb(instance)));
results.idleMemoryMb = {
  cgroupP50: round1(percentile(memory, 50)),
  cgroupMax: round1(Math.max(...memory)),
  serverRssP50: round1(percentile(rss, 50)),
};
log("idle memory per sandbox (MB)", results.idleMemoryMb);
await Promise.all(many.map((instance) => instance.dispose()));

for (const key of ["createToHealthyMs", "bareContainerMs", "resumeRunningMs", "resumeStoppedMs"])
  for (const p of Object.keys(results[key])) results[key][p] = Math.round(results[key][p]);
results.createOverBaseline = round1(results.createToHealthyMs.p50 / results.bareContainerMs.p50);
if (values.json)
  process.stdout.write(`${JSON.stringify({ image: IMAGE, network, rounds: ROUNDS, ...results })}\n`);
else {
  const r = results;
  process.stdout.write(
    [
      `| metric | value | target |`,
      `| --- | --- | --- |`,
      `| create → healthy p50 / p90 (ms) | ${r.createToHealthyMs.p50} / ${r.createToHealthyMs.p90} | ≤ 500 p50 ${r.createToHealthyMs.p50 <= 500 ? "✓" : "✗"} |`,
      `| bare container (engine baseline) p50 (ms) | ${r.bareContainerMs.p50} | ratio ${r.createOverBaseline}× |`,
      `| resume, running (ms) p50 / p90 | ${r.resumeRunningMs.p50} / ${r.resumeRunningMs.p90} | ≤ 200 ${r.resumeRunningMs.p50 <= 200 ? "✓" : "✗"} |`,
      `| resume, stopped → started (ms) p50 / p90 | ${r.resumeStoppedMs.p50} / ${r.resumeStoppedMs.p90} | |`,
      `| ${CONCURRENT} concurrent creates (ms) | ${r.concurrent.ms} | ≤ 3000 ${r.concurrent.ms <= 3000 ? "✓" : "✗"} |`,
      `| idle memory per sandbox: cgroup p50 / max, server RSS p50 (MB) | ${r.idleMemoryMb.cgroupP50} / ${r.idleMemoryMb.cgroupMax}, ${r.idleMemoryMb.serverRssP50} | |`,
    ].join("\n") + "\n",
  );
}
