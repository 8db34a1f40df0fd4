#!/usr/bin/env node
// Benchmark: this server against the Rust `sandbox-agent` 0.4.2 binary and the Node floor
// (bench/node-floor-server.mjs: node:http doing the same I/O and nothing else), side by side in one
// run with the same dependency-free mock agent (ours, `packages/mock-agent`), rounds interleaved.
//   node bench/rust-peer.mjs [--install] [--quick] [--json] [--server-args "ARGS"] [--profile DIR]
//                            [--only start|requests] [--starts N] [--rounds N]
// --rounds N (default 7, 3 with --quick) repeats the request rows (the first 500 echo turns' p50 and
// p99, CPU per turn over requests 501–1,500 and 1,501–2,500) N times, each round on a fresh server
// per kind, the kinds in an order that rotates per round: ours, Rust, the floor, and the floor with
// our server's V8 flags (`--interrupt-budget=8000 --max-inlined-bytecode-size=230`, which ours sets
// itself at its first work). It prints the median of each figure over the rounds with its range (min–max), and per round
// the ratios to the Rust peer's figure in that round, with their median; progress goes to stderr.
// --only start measures only start → health and idle RSS (and `node -e 0`), in --starts N rounds
// (default 7, 3 with --quick); --only requests only the request rounds.
// --server-args adds node options to the command line of our server and of the floor (for example
// "--max-semi-space-size=4"). --profile DIR measures nothing else: it CPU-profiles ours and the floor
// over the first 500, the next 1,000 and 1,000 more turns (the cold, warm and steady rows), writes DIR/KIND-PHASE.cpuprofile
// and prints where each one's main thread spent that time.
// The Rust binary is a prebuilt executable, so it is never a dependency of this repository:
// `--install` puts `@sandbox-agent/cli-linux-x64@0.4.2` into bench/.rust-peer/ (gitignored), or
// point SANDBOX_AGENT_RUST_BIN at one. Always run with `--no-telemetry`.
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import { loadavg } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, mockAgentBin, tempDir } from "@sandbox-agent/testkit";
import {
  cpuMs,
  cpuSplitMs,
  keepAliveAgent,
  median,
  percentile,
  request,
  UsageError,
  benchArgs,
  runMain,
  splitNodeArgs,
  sseSplitter,
  startNode,
  startServer,
  untilHealthy,
  usageFail,
} from "./common.mjs";
import { profileWindow, summarize } from "./cpu-profile.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const peerDir = path.join(here, ".rust-peer");
const PEER_PACKAGE = "@sandbox-agent/cli-linux-x64@0.4.2";
const args = benchArgs(import.meta.url, {
  install: { type: "boolean" },
  quick: { type: "boolean" },
  "server-args": { type: "string" },
  profile: { type: "string" },
  only: { type: "string" },
  starts: { type: "string" },
  rounds: { type: "string" },
});
const quick = args.quick;
const asJson = args.json;
const only = args.only;
if (only !== undefined && only !== "start" && only !== "requests")
  usageFail(import.meta.url, `--only takes "start" or "requests", not "${only}"`);
const STARTS = Number(args.starts ?? (quick ? 3 : 7));
if (!Number.isInteger(STARTS) || STARTS < 1)
  usageFail(import.meta.url, `--starts takes a whole number of at least 1, not "${args.starts}"`);
const ROUNDS = Number(args.rounds ?? (quick ? 3 : 7));
if (!Number.isInteger(ROUNDS) || ROUNDS < 1)
  usageFail(import.meta.url, `--rounds takes a whole number of at least 1, not "${args.rounds}"`);
const COLD_REQUESTS = 500;
const WARM_REQUESTS = quick ? 300 : 1000;
const STREAM_EVENTS = quick ? 20_000 : 100_000;
const STREAM_ROUNDS = quick ? 1 : 5;
const CONNECTIONS = 50;

const began = performance.now();
/** Where a run is (stderr, also with --json): a full run takes minutes. */
const progress = (message) =>
  console.error(
    `[${((performance.now() - began) / 1000).toFixed(0)} s, load ${loadavg()[0].toFixed(1)}] ${message}`,
  );
const rss = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]) * 1024;
const mib = (bytes) => Math.round((bytes / 1048576) * 10) / 10;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function peerBinary() {
  if (process.env.SANDBOX_AGENT_RUST_BIN) return process.env.SANDBOX_AGENT_RUST_BIN;
  const bin = path.join(peerDir, "node_modules/@sandbox-agent/cli-linux-x64/bin/sandbox-agent");
  if (!existsSync(bin) && args.install) {
    mkdirSync(peerDir, { recursive: true });
    writeFileSync(path.join(peerDir, "package.json"), '{"private":true}\n');
    execFileSync("npm", ["install", "--no-save", "--ignore-scripts", "--prefix", peerDir, PEER_PACKAGE], {
      stdio: "inherit",
    });
  }
  if (!existsSync(bin))
    throw new UsageError(
      `No Rust peer: run with --install (puts ${PEER_PACKAGE} in bench/.rust-peer) or set SANDBOX_AGENT_RUST_BIN.`,
    );
  chmodSync(bin, 0o755);
  return bin;
}

/** The Rust server with its `mock` agent's launcher replaced by our mock agent. */
async function startPeer(bin) {
  const data = tempDir("rust-peer-");
  const launcher = path.join(data, "sandbox-agent/bin/agent_processes/mock-acp");
  mkdirSync(path.dirname(launcher), { recursive: true });
  writeFileSync(launcher, `#!/bin/sh\nexec "${process.execPath}" "${mockAgentBin}" "$@"\n`);
  chmodSync(launcher, 0o755);
  const port = await freePort();
  const env = { ...process.env, XDG_DATA_HOME: data, HOME: data };
  const started = performance.now();
  const child = spawn(bin, ["server", "--no-telemetry", "--no-token", "--port", String(port)], {
    stdio: "ignore",
    env,
  });
  const url = `http://127.0.0.1:${port}`;
  await untilHealthy(`${url}/v1/health`);
  return { url, child, startMs: performance.now() - started, stop: () => child.kill("SIGTERM") };
}

/** One ACP connection over either server's HTTP transport, with its SSE stream open. */
class Connection {
  static seq = 0;
  constructor(kind, base) {
    this.kind = kind;
    this.base = base;
    this.pending = new Map();
    this.onUpdate = () => {};
    this.nextId = 1;
    // Ours and the floor speak `/v2/rpc`; the Rust peer its `/v1/acp/{server id}`.
    this.v2 = kind !== "rust";
    this.url = this.v2 ? `${base}/v2/rpc` : `${base}/v1/acp/bench-${process.pid}-${Connection.seq++}`;
  }

  async open() {
    const init = {
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: { protocolVersion: 1, clientCapabilities: {} },
    };
    const headers = { "content-type": "application/json", accept: "application/json" };
    if (this.v2) init.params._meta = { "sandboxagent.dev": { agent: "mock" } };
    const res = await request(
      this.v2 ? this.url : `${this.url}?agent=mock`,
      "POST",
      headers,
      JSON.stringify(init),
    );
    if (res.status !== 200) throw new Error(`${this.kind} initialize: ${res.status} ${res.text}`);
    this.headers = this.v2 ? { "acp-connection-id": res.headers["acp-connection-id"] } : {};
    await new Promise((resolve, reject) => {
      const req = http.get(
        this.url,
        { headers: { accept: "text/event-stream", ...this.headers }, agent: keepAliveAgent },
        (res) => {
          this.sse = res;
          const feed = sseSplitter((_event, data) => this.onMessage(JSON.parse(data)));
          res.setEncoding("utf8").on("data", feed);
          resolve();
        },
      );
      req.on("error", reject);
    });
  }

  onMessage(message) {
    if (message.method === "session/update") return this.onUpdate(message);
    const waiter = message.id !== undefined && this.pending.get(message.id);
    if (waiter) {
      this.pending.delete(message.id);
      waiter(message);
    }
  }

  /** Sends a request; resolves with its response (from the SSE stream, or the Rust POST's body). */
  async call(method, params) {
    const id = this.nextId++;
    const answered = new Promise((resolve) => this.pending.set(id, resolve));
    const res = await request(
      this.url,
      "POST",
      { "content-type": "application/json", accept: "application/json", ...this.headers },
      JSON.stringify({ jsonrpc: "2.0", id, method, params }),
    );
    if (res.status === 200 && res.text) {
      this.pending.delete(id);
      return JSON.parse(res.text);
    }
    if (res.status !== 202) throw new Error(`${this.kind} ${method}: ${res.status} ${res.text}`);
    return answered;
  }

  async close() {
    this.sse?.destroy();
    // The Rust peer may hold a DELETE open; the bench does not wait for it.
    await request(this.url, "DELETE", this.headers, undefined, AbortSignal.timeout(2000)).catch(
      () => undefined,
    );
  }
}

async function session(conn) {
  return (await conn.call("session/new", { cwd: "/tmp", mcpServers: [] })).result.sessionId;
}

const nodeArgs = splitNodeArgs(args["server-args"]);
const floorServer = path.join(here, "node-floor-server.mjs");
/**
 * The V8 flags our server sets itself at its first work (server-v8-flags.ts: the interrupt budget
 * and the inlining cap): the floor runs once more with them on its command line in the request
 * rounds, so that the CPU rows compare like with like (with V8's default budget the floor is still
 * tiering up through requests 501–1,500). Keep in step with server-v8-flags.ts.
 */
const SERVER_FLAGS = ["--interrupt-budget=8000", "--max-inlined-bytecode-size=230"];
/** The servers; the floor is started and polled exactly as ours is, with the same mock agent. */
const start = (kind, bin, extraNodeArgs = []) =>
  kind === "ours"
    ? startServer([], undefined, [...nodeArgs, ...extraNodeArgs])
    : kind === "floor" || kind === "floorBudget"
      ? startNode([
          ...nodeArgs,
          ...(kind === "floorBudget" ? SERVER_FLAGS : []),
          ...extraNodeArgs,
          floorServer,
          process.execPath,
          mockAgentBin,
        ])
      : startPeer(bin);
/** The kinds of every row; the request rounds add `floorBudget`, the floor with our V8 budget. */
const KINDS = ["ours", "rust", "floor"];
const REQUEST_KINDS = [...KINDS, "floorBudget"];
/** Column headings, and the short names of the ratio columns. */
const LABELS = {
  ours: "ours",
  rust: "Rust 0.4.2",
  floor: "Node floor",
  floorBudget: `floor + \`${SERVER_FLAGS.join(" ")}\``,
};
const SHORT = { ours: "ours", rust: "Rust", floor: "floor", floorBudget: "floor+budget" };

/** Stops a server and waits for it to exit, so its shutdown does not overlap the next server's rows. */
async function stop(server) {
  const { child } = server;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  server.stop();
  const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
  await exited;
  clearTimeout(timer);
}

/** Spawn → exit of `node -e 0`: what starting the Node runtime costs before any server code runs. */
async function measureEmptyNode() {
  const started = performance.now();
  await new Promise((resolve) =>
    spawn(process.execPath, ["-e", "0"], { stdio: "ignore" }).once("exit", resolve),
  );
  return performance.now() - started;
}

async function measureStart(kind, bin) {
  const server = await start(kind, bin);
  await sleep(1000);
  const idle = rss(server.child.pid);
  await stop(server);
  return { startMs: server.startMs, listenMs: server.listenMs, idleRss: idle };
}

/**
 * The first requests of a fresh connection: prompt latency per request, then warm CPU per request.
 * `phase` runs each of the two loops (the profile mode wraps them in a profiler).
 */
async function measureRequests(kind, server, phase = (_name, work) => work()) {
  const conn = new Connection(kind, server.url);
  await conn.open();
  const sessionId = await session(conn);
  const prompt = (text) => conn.call("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
  const cold = [];
  await phase("cold", async () => {
    for (let i = 0; i < COLD_REQUESTS; i++) {
      const t = performance.now();
      await prompt("echo ping");
      cold.push(performance.now() - t);
    }
  });
  const cpu0 = cpuMs(server.child.pid);
  const t0 = performance.now();
  await phase("warm", async () => {
    for (let i = 0; i < WARM_REQUESTS; i++) await prompt("echo ping");
  });
  const warmMs = performance.now() - t0;
  const cpuPerRequestUs = ((cpuMs(server.child.pid) - cpu0) * 1000) / WARM_REQUESTS;
  // The same again once V8's warm-up is over (requests 1,501–2,500), split into user and system time.
  const steady0 = cpuSplitMs(server.child.pid);
  await phase("steady", async () => {
    for (let i = 0; i < WARM_REQUESTS; i++) await prompt("echo ping");
  });
  const steady1 = cpuSplitMs(server.child.pid);
  await conn.close();
  return {
    coldP50: percentile(cold, 50),
    coldP99: percentile(cold, 99),
    warmMean: warmMs / WARM_REQUESTS,
    cpuPerRequestUs,
    steadyUserUs: ((steady1.user - steady0.user) * 1000) / WARM_REQUESTS,
    steadySystemUs: ((steady1.system - steady0.system) * 1000) / WARM_REQUESTS,
  };
}

async function measureStream(kind, server) {
  const conn = new Connection(kind, server.url);
  await conn.open();
  const sessionId = await session(conn);
  let count = 0;
  let ordered = true;
  conn.onUpdate = (m) => {
    const text = m.params.update.content?.text;
    if (text !== `chunk ${count + 1} `) ordered = false;
    count++;
  };
  const t = performance.now();
  await conn.call("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text: `chunks ${STREAM_EVENTS}` }],
  });
  const ms = performance.now() - t;
  // The Rust POST answers when the turn ends; give late updates a moment to arrive before counting.
  let last = -1;
  while (last !== count) {
    last = count;
    await sleep(300);
  }
  await conn.close();
  return { eventsPerSec: (count / ms) * 1000, lost: STREAM_EVENTS - count, ordered };
}

async function measureConnections(kind, server) {
  const conns = [];
  for (let i = 0; i < CONNECTIONS; i++) {
    const conn = new Connection(kind, server.url);
    await conn.open();
    conns.push(conn);
  }
  await sleep(1000);
  const bytes = rss(server.child.pid);
  await Promise.all(conns.map((c) => c.close()));
  return bytes;
}

/** `--profile DIR`: where the main thread of ours and of the floor spends the request rows' time. */
async function profileRequests(dir) {
  mkdirSync(dir, { recursive: true });
  for (const kind of ["ours", "floor"]) {
    const port = await freePort();
    const server = await start(kind, undefined, [`--inspect=127.0.0.1:${port}`]);
    const requests = await measureRequests(kind, server, async (name, work) => {
      const profile = await profileWindow(port, work);
      const turns = name === "cold" ? COLD_REQUESTS : WARM_REQUESTS; // warm and steady
      console.log(
        `${kind}, ${name} turns:\n${summarize(profile, turns, path.join(dir, `${kind}-${name}.cpuprofile`))}`,
      );
    });
    console.log(kind, requests);
    server.stop();
  }
}

/** The request rows (one round of one server), rounded as they are reported. */
const REQUEST_FIGURES = [
  "coldP50Ms",
  "coldP99Ms",
  "warmMeanMs",
  "cpuPerWarmRequestUs",
  "cpuPerSteadyRequestUs",
  "systemCpuPerSteadyRequestUs",
];
const requestFigures = (r) => ({
  coldP50Ms: Number(r.coldP50.toFixed(3)),
  coldP99Ms: Number(r.coldP99.toFixed(3)),
  warmMeanMs: Number(r.warmMean.toFixed(3)),
  cpuPerWarmRequestUs: Math.round(r.cpuPerRequestUs),
  cpuPerSteadyRequestUs: Math.round(r.steadyUserUs + r.steadySystemUs),
  systemCpuPerSteadyRequestUs: Math.round(r.steadySystemUs),
});
/** The ratios reported per round, [numerator, denominator] kinds. */
const RATIOS = [
  ["ours", "rust"],
  ["floor", "rust"],
  ["floorBudget", "rust"],
  ["ours", "floor"],
  ["ours", "floorBudget"],
];
const ratioOf = (a, b) => (b === 0 ? null : Number((a / b).toFixed(2)));

/**
 * The request rows, `ROUNDS` times: each round starts a fresh server of every request kind and
 * measures them one at a time, in an order rotated by one per round so that no kind always goes
 * first; a round's servers stop at its end and are waited for, so that no shutdown overlaps the
 * next round, except the last round's ours, Rust and floor when `keep` (the streaming and
 * 50-connection rows run on them, as on the one server per kind before there were rounds).
 */
async function requestRounds(bin, keep) {
  const rounds = [];
  let kept = {};
  for (let r = 0; r < ROUNDS; r++) {
    const order = REQUEST_KINDS.map((_, i) => REQUEST_KINDS[(i + r) % REQUEST_KINDS.length]);
    const round = { order };
    const servers = {};
    for (const kind of order) {
      servers[kind] = await start(kind, bin);
      round[kind] = requestFigures(await measureRequests(kind, servers[kind]));
    }
    rounds.push(round);
    const f = (kind) =>
      `${kind} ${round[kind].coldP50Ms.toFixed(2)} / ${round[kind].coldP99Ms.toFixed(1)} ms, ` +
      `${round[kind].cpuPerWarmRequestUs} / ${round[kind].cpuPerSteadyRequestUs} µs`;
    progress(
      `request round ${r + 1}/${ROUNDS} (cold p50 / p99, CPU per turn 501–1,500 / 1,501–2,500): ` +
        order.map(f).join("; "),
    );
    const last = r === ROUNDS - 1;
    for (const kind of order)
      if (last && keep && KINDS.includes(kind)) kept[kind] = servers[kind];
      else await stop(servers[kind]);
  }
  return { rounds, servers: kept };
}

/**
 * Per kind the median of each request figure over the rounds and its range; per ratio of
 * `RATIOS` and figure, the ratio in each round, their median and in how many rounds it was ≤ 1.
 */
function summarizeRequests(rounds) {
  const perKind = {};
  for (const kind of REQUEST_KINDS) {
    perKind[kind] = { requestRange: {} };
    for (const figure of REQUEST_FIGURES) {
      const values = rounds.map((round) => round[kind][figure]);
      const middle = median(values);
      perKind[kind][figure] = figure.endsWith("Us") ? Math.round(middle) : Number(middle.toFixed(3));
      perKind[kind].requestRange[figure] = [Math.min(...values), Math.max(...values)];
    }
  }
  const ratios = {};
  for (const [a, b] of RATIOS) {
    const byFigure = (ratios[`${a}/${b}`] = {});
    for (const figure of REQUEST_FIGURES) {
      const perRound = rounds.map((round) => ratioOf(round[a][figure], round[b][figure]));
      const known = perRound.filter((x) => x !== null);
      byFigure[figure] = {
        median: known.length ? Number(median(known).toFixed(2)) : null,
        perRound,
        roundsAtOrUnder1: known.filter((x) => x <= 1).length,
      };
    }
  }
  return { perKind, ratios, rounds };
}

async function main() {
  if (args.profile !== undefined) return profileRequests(args.profile);
  const bin = peerBinary();
  const kinds = KINDS;
  const load = { before: loadavg().map((x) => Number(x.toFixed(2))) };
  const done = (summary) => {
    load.after = loadavg().map((x) => Number(x.toFixed(2)));
    summary.loadAverage = load;
    report(kinds, summary);
  };
  let summary = {};
  if (only !== "requests") {
    const starts = { ours: [], rust: [], floor: [] };
    const emptyNode = [];
    for (let i = 0; i < STARTS; i++) {
      for (const kind of kinds) starts[kind].push(await measureStart(kind, bin));
      emptyNode.push(await measureEmptyNode());
    }
    progress(`start and idle RSS measured (${STARTS} rounds)`);
    summary = summarizeStarts(kinds, starts, emptyNode);
    if (only === "start") return done(summary);
  }
  const { rounds, servers } = await requestRounds(bin, only !== "requests");
  const requests = summarizeRequests(rounds);
  for (const kind of REQUEST_KINDS) summary[kind] = { ...summary[kind], ...requests.perKind[kind] };
  summary.requestRatios = requests.ratios;
  summary.requestRounds = rounds;
  if (only === "requests") return done(summary);
  const streams = { ours: [], rust: [], floor: [] };
  for (let i = 0; i < STREAM_ROUNDS; i++)
    for (const kind of kinds) streams[kind].push(await measureStream(kind, servers[kind]));
  progress(
    `streams (updates/s per round) ${JSON.stringify(
      Object.fromEntries(kinds.map((kind) => [kind, streams[kind].map((x) => Math.round(x.eventsPerSec))])),
    )}`,
  );
  const rss50 = {};
  for (const kind of kinds) {
    rss50[kind] = await measureConnections(kind, servers[kind]);
    await stop(servers[kind]);
  }
  // The same on a fresh server: what connections hold, without what the streams above left behind.
  for (const kind of kinds) {
    const server = await start(kind, bin);
    Object.assign(summary[kind], {
      rss50MiB: mib(rss50[kind]),
      rss50FreshServerMiB: mib(await measureConnections(kind, server)),
    });
    await stop(server);
  }
  progress("RSS with 50 connections measured");
  for (const kind of kinds) {
    const s = streams[kind];
    Object.assign(summary[kind], {
      streamEventsPerSec: Math.round(median(s.map((x) => x.eventsPerSec))),
      // Each server's best round too: the one least disturbed by whatever else shares the cores.
      streamBestEventsPerSec: Math.round(Math.max(...s.map((x) => x.eventsPerSec))),
      streamLostPct: Number(
        ((s.reduce((a, x) => a + x.lost, 0) / (STREAM_EVENTS * s.length)) * 100).toFixed(2),
      ),
      streamInOrder: s.every((x) => x.ordered),
    });
  }
  done(summary);
}

/** Medians of the start rounds (and start → health's 90th percentile): per server start → health, → "listening" line, idle RSS. */
function summarizeStarts(kinds, starts, emptyNode) {
  const summary = {};
  for (const kind of kinds)
    summary[kind] = {
      startMs: Math.round(median(starts[kind].map((x) => x.startMs))),
      startP90Ms: Math.round(
        percentile(
          starts[kind].map((x) => x.startMs),
          90,
        ),
      ),
      listenMs: kind === "rust" ? "" : Math.round(median(starts[kind].map((x) => x.listenMs))),
      idleRssMiB: mib(median(starts[kind].map((x) => x.idleRss))),
    };
  summary.emptyNodeMs = Math.round(median(emptyNode));
  summary.emptyNodeP90Ms = Math.round(percentile(emptyNode, 90));
  return summary;
}

const table = (head, rows) =>
  [
    `| ${head.join(" | ")} |`,
    `| ${head.map(() => "---").join(" | ")} |`,
    ...rows.map((r) => `| ${r.join(" | ")} |`),
  ].join("\n");

function report(kinds, summary) {
  if (asJson) return console.log(JSON.stringify(summary, null, 2));
  const ratio = (a, b) =>
    typeof a === "number" && typeof b === "number" && b !== 0 ? (a / b).toFixed(2) : "";
  const ratioName = ([a, b]) => `${SHORT[a]} / ${SHORT[b]}`;
  const out = [];
  if (summary.requestRatios) {
    const n = summary.requestRounds.length;
    out.push(
      `Request rows: median (min–max) of ${n} round${n === 1 ? "" : "s"}, each on fresh servers in rotating order;` +
        ` the ratios are the median of the ratios within each round.`,
      table(
        ["figure", ...REQUEST_KINDS.map((k) => LABELS[k]), ...RATIOS.map(ratioName)],
        REQUEST_FIGURES.map((figure) => [
          figure,
          ...REQUEST_KINDS.map((kind) => {
            const [lo, hi] = summary[kind].requestRange[figure];
            return n === 1 ? `${summary[kind][figure]}` : `${summary[kind][figure]} (${lo}–${hi})`;
          }),
          ...RATIOS.map(([a, b]) => summary.requestRatios[`${a}/${b}`][figure].median ?? ""),
        ]),
      ),
      "",
      `floor+budget: the Node floor with our server's V8 flags (${SERVER_FLAGS.join(" ")}, which ours sets at its first work).`,
      "",
      "Ratios to the Rust peer per round (the round's order in its heading), their median, and the rounds at or under 1:",
      table(
        ["ratio", ...summary.requestRounds.map((r, i) => `${i + 1}: ${r.order.join(", ")}`), "median", "≤ 1"],
        ["coldP50Ms", "coldP99Ms", "cpuPerWarmRequestUs", "cpuPerSteadyRequestUs"].flatMap((figure) =>
          RATIOS.filter(([, b]) => b === "rust").map(([a, b]) => {
            const x = summary.requestRatios[`${a}/${b}`][figure];
            return [
              `${figure}, ${ratioName([a, b])}`,
              ...x.perRound.map((v) => v ?? ""),
              x.median ?? "",
              `${x.roundsAtOrUnder1} of ${n}`,
            ];
          }),
        ),
      ),
      "",
    );
  }
  const requestOnly = new Set([...REQUEST_FIGURES, "requestRange"]);
  const keys = Object.keys(summary.ours).filter((key) => !requestOnly.has(key));
  if (keys.length)
    out.push(
      table(
        ["figure", ...kinds.map((k) => LABELS[k]), "ours / Rust", "floor / Rust", "ours / floor"],
        keys.map((key) => {
          const [ours, rust, floor] = kinds.map((kind) => summary[kind][key]);
          return [key, ours, rust, floor, ratio(ours, rust), ratio(floor, rust), ratio(ours, floor)];
        }),
      ),
    );
  if (summary.emptyNodeMs !== undefined)
    out.push(
      `\n\`node -e 0\`, spawn → exit (ms, median / p90 of ${STARTS}, in the same rounds): ${summary.emptyNodeMs} / ${summary.emptyNodeP90Ms}`,
    );
  const { before, after } = summary.loadAverage;
  out.push(`\nLoad average (1, 5, 15 min) before: ${before.join(", ")}; after: ${after.join(", ")}`);
  console.log(out.join("\n"));
}

runMain(main);
