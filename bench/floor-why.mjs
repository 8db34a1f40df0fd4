#!/usr/bin/env node
// The evidence behind two Rust-peer targets that the Node floor misses too (bench/README, Rust peer):
//   node bench/floor-why.mjs [--memory] [--p99] [--kinds floor,ours] [--server-args "ARGS"]
// --memory: each server idle and with 50 connections (SSE open), its RSS split by what holds it: V8's
//   heap spaces and Buffers (bench/memory-probe.mjs) and resident pages by mapping (/proc/PID/smaps:
//   the `node` binary, other files, anonymous, malloc's brk heap).
// --p99: the 500 cold `echo ping` turns under V8's sampling profiler (bench/cpu-profile.mjs); each
//   turn's start and end on the profile's monotonic clock, so the slowest turns can be split into the
//   server's main-thread work, its idle time (waiting on the agent or client) and time without any
//   sample (the process not on a CPU), with GC and `(program)` apart, and the client's own GC.
// Without --memory or --p99 it does both.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { PerformanceObserver } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { freePort, mockAgentBin, tempDir } from "@sandbox-agent/testkit";
import {
  benchArgs,
  percentile,
  rpcConnection,
  runMain,
  splitNodeArgs,
  startNode,
  startServer,
  usageFail,
} from "./common.mjs";
import { profileWindow } from "./cpu-profile.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = benchArgs(import.meta.url, {
  memory: { type: "boolean" },
  p99: { type: "boolean" },
  kinds: { type: "string", default: "floor,ours" },
  "server-args": { type: "string" },
});
const KINDS = args.kinds.split(",");
if (!KINDS.every((kind) => kind === "floor" || kind === "ours"))
  usageFail(import.meta.url, `--kinds takes floor, ours or both, comma-separated, not "${args.kinds}"`);
const SERVER_ARGS = splitNodeArgs(args["server-args"]);
const both = !args.memory && !args.p99;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const nowUs = () => Number(process.hrtime.bigint() / 1000n);
const round = (x) => Math.round(x * 100) / 100;

function start(kind, nodeArgs) {
  const args = [...nodeArgs, ...SERVER_ARGS];
  if (kind === "ours") return startServer([], undefined, args);
  return startNode([...args, path.join(here, "node-floor-server.mjs"), process.execPath, mockAgentBin]);
}

/** Resident MiB of /proc/PID/smaps by mapping: the `node` binary, other files, anonymous, brk heap. */
function residentMappings(pid) {
  const out = { nodeBinary: 0, otherFiles: 0, anonymous: 0, brkHeap: 0 };
  let kind = "anonymous";
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ (\d+)\s*(.*)$/.exec(line);
    if (!head) {
      if (line.startsWith("Rss:")) out[kind] += Number(/(\d+)/.exec(line)[1]) / 1024;
      continue;
    }
    const file = head[1] !== "0" && head[2].startsWith("/");
    kind =
      head[2] === "[heap]"
        ? "brkHeap"
        : !file
          ? "anonymous"
          : head[2].endsWith("/node")
            ? "nodeBinary"
            : "otherFiles";
  }
  return out;
}

/** The memory probe's report (asked by SIGUSR2) with the resident mappings, in MiB. */
async function memory(pid, file) {
  const seen = existsSync(file) ? readFileSync(file, "utf8").trim().split("\n").length : 0;
  process.kill(pid, "SIGUSR2");
  for (const until = Date.now() + 5000; Date.now() < until; await sleep(10)) {
    const lines = existsSync(file) ? readFileSync(file, "utf8").trim().split("\n") : [];
    if (lines.length <= seen) continue;
    const { now } = JSON.parse(lines.at(-1));
    const space = (name) => round(now.spaces[name]?.committed ?? 0);
    return {
      rss: round(now.rss),
      ...Object.fromEntries(Object.entries(residentMappings(pid)).map(([k, v]) => [k, round(v)])),
      v8NewSpace: space("new"),
      v8OldSpace: space("old"),
      v8CodeSpace: space("code"),
      v8HeapCommitted: round(now.heapCommitted),
      arrayBuffers: round(now.arrayBuffers),
      external: round(now.external),
    };
  }
  throw new Error("the memory probe did not answer");
}

async function measureMemory(kind) {
  const file = path.join(tempDir("floor-why-"), "probe.jsonl");
  process.env.SANDBOX_AGENT_MEMORY_PROBE = file;
  const server = await start(kind, ["--import", path.join(here, "memory-probe.mjs")]);
  await sleep(1000);
  const idle = await memory(server.child.pid, file);
  const conns = [];
  for (let i = 0; i < 50; i++) conns.push(await rpcConnection(server.url));
  await sleep(1000);
  const fifty = await memory(server.child.pid, file);
  await Promise.all(conns.map((c) => c.close()));
  server.stop();
  console.log(
    `${kind}${SERVER_ARGS.length ? ` ${SERVER_ARGS.join(" ")}` : ""}, MiB: figure | idle | 50 connections | added`,
  );
  for (const key of Object.keys(idle))
    console.log(`  ${key} | ${idle[key]} | ${fifty[key]} | ${round(fifty[key] - idle[key])}`);
}

/** Per sample of a CPU profile: its time (µs, monotonic) and group. */
function samplesOf(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  let t = profile.startTime;
  return profile.samples.map((id, i) => {
    t += profile.timeDeltas[i];
    const { functionName, url } = byId.get(id);
    return { t, group: functionName.startsWith("(") ? functionName : url ? "JavaScript" : "native" };
  });
}

async function measureP99(kind, clientGc) {
  const port = await freePort();
  const server = await start(kind, [`--inspect=127.0.0.1:${port}`]);
  const conn = await rpcConnection(server.url);
  const { sessionId } = (await conn.call("session/new", { cwd: "/tmp", mcpServers: [] })).result;
  const turns = [];
  const profile = await profileWindow(port, async () => {
    for (let i = 0; i < 500; i++) {
      const t0 = nowUs();
      await conn.call("session/prompt", { sessionId, prompt: [{ type: "text", text: "echo ping" }] });
      turns.push({ t0, t1: nowUs() });
    }
  });
  await conn.close();
  server.stop();
  const samples = samplesOf(profile);
  const interval = (profile.endTime - profile.startTime) / samples.length / 1000; // ms
  const ms = turns.map((x) => (x.t1 - x.t0) / 1000);
  const slowest = [...turns].sort((a, b) => b.t1 - b.t0 - (a.t1 - a.t0)).slice(0, 15);
  const split = { wall: 0, busy: 0, idle: 0, gc: 0, program: 0, clientGc: 0 };
  for (const { t0, t1 } of slowest) {
    split.wall += (t1 - t0) / 1000;
    for (const { group } of samples.filter((s) => s.t >= t0 && s.t <= t1)) {
      if (group === "(idle)") split.idle += interval;
      else split.busy += interval;
      if (group === "(garbage collector)") split.gc += interval;
      if (group === "(program)") split.program += interval;
    }
    for (const [s, e] of clientGc)
      if (e > t0 && s < t1) split.clientGc += (Math.min(e, t1) - Math.max(s, t0)) / 1000;
  }
  const phase = { busy: 0, gc: 0, program: 0 };
  for (const { group } of samples) {
    if (group !== "(idle)") phase.busy += interval;
    if (group === "(garbage collector)") phase.gc += interval;
    if (group === "(program)") phase.program += interval;
  }
  const f = (x) => x.toFixed(1);
  console.log(
    `${kind}: 500 cold turns p50 ${percentile(ms, 50).toFixed(2)}, p99 ${percentile(ms, 99).toFixed(2)}, max ${Math.max(...ms).toFixed(2)} ms;` +
      ` main thread over the phase: busy ${f(phase.busy)} ms, GC ${f(phase.gc)}, (program) ${f(phase.program)}\n` +
      `  15 slowest turns, ${f(split.wall)} ms: main thread busy ${f(split.busy)} (GC ${f(split.gc)}, (program) ${f(split.program)}),` +
      ` idle ${f(split.idle)}, no sample (process not running) ${f(split.wall - split.busy - split.idle)}; client GC ${f(split.clientGc)}`,
  );
}

async function main() {
  if (both || args.memory) for (const kind of KINDS) await measureMemory(kind);
  if (!both && !args.p99) return;
  const clientGc = [];
  const offset = nowUs() - performance.now() * 1000;
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries())
      clientGc.push([e.startTime * 1000 + offset, (e.startTime + e.duration) * 1000 + offset]);
  });
  observer.observe({ entryTypes: ["gc"] });
  for (const kind of KINDS) await measureP99(kind, clientGc);
  observer.disconnect();
}

runMain(main);
