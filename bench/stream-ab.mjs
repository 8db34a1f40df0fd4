#!/usr/bin/env node
// Server CPU of two or more server builds, interleaved in one run (an A/B of a change):
//   node bench/stream-ab.mjs [--mode stream|cold] [--rounds N] [--json] --build "NAME=PATH [NODE_OPTIONS]" ...
// PATH is a server bundle directory (with its sandbox-agent.mjs: copy packages/server/bundle aside
// after `npm run bundle -w @sandbox-agent/server` to keep a build) or a server entry script, e.g.
// packages/server/dist/src/cli.js; words after the path are options for node (`--build
// "pool1=/tmp/main --v8-pool-size=1"`). CPU from /proc/PID/task/*/schedstat (every thread, in ns, where
// /proc/PID/stat counts 10 ms ticks) for the server and its agent, process.cpuUsage() for the
// client; per-round figures go to stderr, medians to stdout, with the load average before and after.
//
// --mode stream (the default): each server is started once (on disk, its own data directory) and
// warmed by one turn; then each of --rounds (default 8) runs one turn per server, in alternating
// order, each on a new connection: a `chunks 2000` warm-up, then a `chunks N` turn (--events,
// default 200000) read by the same client as rust-peer.mjs (the minimal splitter, JSON.parse of
// every event, the order checked).
//
// --mode cold: a connection's first requests on a fresh server process. Each round starts each
// build afresh (alternating order), opens one connection, `session/new`, then times --cold (500)
// sequential `echo ping` turns (p50, p99, server CPU per turn over them: all threads, and the main
// thread alone, so the optimising compiler's threads are the difference), then --warm (1,000) more
// turns (requests 501–1,500: CPU per turn) and --steady (1,000) more (1,501–2,500), and stops it.
// --floor adds the Node floor (bench/node-floor-server.mjs, see rust-peer.mjs) as one more build.
import { readdirSync, readFileSync } from "node:fs";
import { loadavg } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { mockAgentBin, tempDir } from "@sandbox-agent/testkit";
import { benchArgs, median, percentile, rpcConnection, runMain, startNode, usageFail } from "./common.mjs";

const args = benchArgs(import.meta.url, {
  mode: { type: "string", default: "stream" },
  rounds: { type: "string", default: "8" },
  events: { type: "string", default: "200000" },
  cold: { type: "string", default: "500" },
  warm: { type: "string", default: "1000" },
  steady: { type: "string", default: "1000" },
  build: { type: "string", multiple: true, default: [] },
  floor: { type: "boolean", default: false },
});
/** A whole-number option's value (at least 1). */
function wholeNumber(name) {
  const value = Number(args[name]);
  if (!Number.isInteger(value) || value < 1) usageFail(import.meta.url, `--${name} takes a whole number ≥ 1`);
  return value;
}
const [ROUNDS, EVENTS, COLD, WARM, STEADY] = ["rounds", "events", "cold", "warm", "steady"].map(wholeNumber);
if (!["stream", "cold"].includes(args.mode)) usageFail(import.meta.url, `--mode is stream or cold`);
const builds = args.build.map((build) => {
  const at = build.indexOf("=");
  if (at < 1) usageFail(import.meta.url, `--build takes NAME=PATH [NODE_OPTIONS...], not "${build}"`);
  const [where, ...nodeArgs] = build
    .slice(at + 1)
    .split(" ")
    .filter(Boolean);
  return { name: build.slice(0, at), where: path.resolve(where), nodeArgs };
});
const floorServer = fileURLToPath(new URL("node-floor-server.mjs", import.meta.url));
if (args.floor) builds.push({ name: "floor", where: floorServer, nodeArgs: [] });
if (builds.length < 1) usageFail(import.meta.url, "name at least one build: --build NAME=PATH");

/** CPU time of one thread so far, in ns (0 if it ended). */
function threadNs(pid, task) {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, "utf8").split(" ")[0]);
  } catch {
    return 0; // The thread ended in between.
  }
}

/** CPU time of every thread of `pid` so far, in ns. */
function cpuNs(pid) {
  return readdirSync(`/proc/${pid}/task`).reduce((ns, task) => ns + threadNs(pid, task), 0);
}

/** The agent process the server started last (the current connection's). */
function agentOf(serverPid) {
  const children = readdirSync(`/proc/${serverPid}/task`).flatMap((task) =>
    readFileSync(`/proc/${serverPid}/task/${task}/children`, "utf8").split(" ").filter(Boolean).map(Number),
  );
  return Math.max(...children);
}

/** One round of one server: a new connection, a warm-up turn, then the measured turn. */
async function turn(server) {
  const conn = await rpcConnection(server.url);
  const { sessionId } = (await conn.call("session/new", { cwd: "/tmp", mcpServers: [] })).result;
  const prompt = (text) => conn.call("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
  await prompt("chunks 2000");
  let count = 0;
  let ordered = true;
  conn.onUpdate = (m) => {
    if (m.params.update.content?.text !== `chunk ${count + 1} `) ordered = false;
    count++;
  };
  const agent = agentOf(server.child.pid);
  const [server0, agent0, client0, t0] = [
    cpuNs(server.child.pid),
    cpuNs(agent),
    process.cpuUsage(),
    performance.now(),
  ];
  await prompt(`chunks ${EVENTS}`);
  const ms = performance.now() - t0;
  const client = process.cpuUsage(client0);
  const result = {
    eventsPerSec: Math.round((count / ms) * 1000),
    serverUs: (cpuNs(server.child.pid) - server0) / 1000 / count,
    agentUs: (cpuNs(agent) - agent0) / 1000 / count,
    clientUs: (client.user + client.system) / count,
    lost: EVENTS - count,
    ordered,
  };
  await conn.close();
  return result;
}

/** Starts a build's server on a free port, on disk in its own data directory. */
function startBuild({ where, nodeArgs }) {
  if (where === floorServer) return startNode([...nodeArgs, floorServer, process.execPath, mockAgentBin]);
  const entry = /\.m?js$/.test(where) ? where : path.join(where, "sandbox-agent.mjs");
  const command = [...nodeArgs, entry, "server", "--port", "0", "--log-level", "warn"];
  return startNode(command, { ...process.env, SANDBOX_AGENT_DATA_DIR: tempDir() });
}

/** Prints a round's figures to stderr (two decimals), unless --json. */
function logRound(i, name, result) {
  const round = (x) => (typeof x === "number" ? Math.round(x * 100) / 100 : x);
  if (!args.json)
    console.error(
      `round ${i + 1} ${name}`,
      JSON.stringify(result, (_k, v) => round(v)),
    );
}

/** The run's summary: the load average before and after, and per build its path and `figures(name)`. */
function summarize(loadBefore, figures) {
  const described = ({ where, nodeArgs }) => [where, ...nodeArgs].join(" ");
  return {
    load: { before: loadBefore, after: loadavg() },
    builds: Object.fromEntries(builds.map((b) => [b.name, { path: described(b), ...figures(b.name) }])),
  };
}

/** Load averages (or other numbers) with two decimals. */
const fmt = (xs) => xs.map((x) => x.toFixed(2)).join(" ");

/** Runs `measure(build)` for each build in each round, alternating the order; its results by build name. */
async function interleaved(measure) {
  const rounds = Object.fromEntries(builds.map(({ name }) => [name, []]));
  for (let i = 0; i < ROUNDS; i++) {
    for (const build of i % 2 ? [...builds].reverse() : builds) {
      const result = await measure(build);
      rounds[build.name].push(result);
      logRound(i, build.name, result);
    }
  }
  return rounds;
}

/**
 * One fresh server's first requests on one connection: the --cold turns timed one by one, then CPU
 * per turn over the --warm turns after them and the --steady turns after those.
 */
async function coldServer(build) {
  const server = await startBuild(build);
  const pid = server.child.pid;
  const conn = await rpcConnection(server.url);
  const { sessionId } = (await conn.call("session/new", { cwd: "/tmp", mcpServers: [] })).result;
  const prompt = () =>
    conn.call("session/prompt", { sessionId, prompt: [{ type: "text", text: "echo ping" }] });
  const cpu = () => [cpuNs(pid), threadNs(pid, pid)];
  const perTurnUs = ([all0, main0], [all1, main1], turns) => [
    (all1 - all0) / 1000 / turns,
    (main1 - main0) / 1000 / turns,
  ];
  const latencies = [];
  const cold0 = cpu();
  for (let i = 0; i < COLD; i++) {
    const t = performance.now();
    await prompt();
    latencies.push(performance.now() - t);
  }
  const warm0 = cpu();
  for (let i = 0; i < WARM; i++) await prompt();
  const steady0 = cpu();
  for (let i = 0; i < STEADY; i++) await prompt();
  const steady1 = cpu();
  await conn.close();
  server.stop();
  const [coldUs, coldMainUs] = perTurnUs(cold0, warm0, COLD);
  const [warmUs, warmMainUs] = perTurnUs(warm0, steady0, WARM);
  const [steadyUs, steadyMainUs] = perTurnUs(steady0, steady1, STEADY);
  return {
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    ...{ coldUs, coldMainUs, warmUs, warmMainUs, steadyUs, steadyMainUs },
  };
}

/** --mode cold: medians over rounds of each build's coldServer figures. */
async function coldMain() {
  const loadBefore = loadavg();
  const rounds = await interleaved(coldServer);
  const keys = Object.keys(rounds[builds[0].name][0]);
  const summary = summarize(loadBefore, (name) =>
    Object.fromEntries(keys.map((k) => [k, Number(median(rounds[name].map((r) => r[k])).toFixed(3))])),
  );
  if (args.json) return console.log(JSON.stringify(summary, null, 2));
  console.log(
    `load average ${fmt(summary.load.before)} → ${fmt(summary.load.after)}; medians of ${ROUNDS} rounds`,
  );
  for (const [name, b] of Object.entries(summary.builds))
    console.log(
      `${name}: first ${COLD} turns p50 ${b.p50.toFixed(3)} ms, p99 ${b.p99.toFixed(3)} ms, server CPU ${Math.round(b.coldUs)} µs/turn ` +
        `(main thread ${Math.round(b.coldMainUs)}); next ${WARM} ${Math.round(b.warmUs)} µs/turn (${Math.round(b.warmMainUs)}); ` +
        `next ${STEADY} ${Math.round(b.steadyUs)} µs/turn (${Math.round(b.steadyMainUs)})`,
    );
}

/** --mode stream. */
async function streamMain() {
  const servers = {};
  for (const build of builds) servers[build.name] = await startBuild(build);
  const loadBefore = loadavg();
  for (const { name } of builds) await turn(servers[name]);
  const rounds = await interleaved(({ name }) => turn(servers[name]));
  for (const { name } of builds) servers[name].stop();
  const medianOf = (name, key) => median(rounds[name].map((r) => r[key]));
  const summary = summarize(loadBefore, (name) => ({
    eventsPerSec: Math.round(medianOf(name, "eventsPerSec")),
    serverUsPerEvent: Number(medianOf(name, "serverUs").toFixed(3)),
    agentUsPerEvent: Number(medianOf(name, "agentUs").toFixed(3)),
    clientUsPerEvent: Number(medianOf(name, "clientUs").toFixed(3)),
    serverUsPerRound: rounds[name].map((r) => Number(r.serverUs.toFixed(3))),
    lost: rounds[name].reduce((sum, r) => sum + r.lost, 0),
    inOrder: rounds[name].every((r) => r.ordered),
  }));
  if (args.json) return console.log(JSON.stringify(summary, null, 2));
  console.log(`load average ${fmt(summary.load.before)} → ${fmt(summary.load.after)}`);
  for (const [name, b] of Object.entries(summary.builds))
    console.log(
      `${name}: ${b.eventsPerSec} updates/s, server ${b.serverUsPerEvent} µs/event (rounds ${fmt(b.serverUsPerRound)}), ` +
        `agent ${b.agentUsPerEvent}, client ${b.clientUsPerEvent}; lost ${b.lost}, in order ${b.inOrder}`,
    );
}

runMain(args.mode === "cold" ? coldMain : streamMain);
