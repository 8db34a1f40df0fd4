#!/usr/bin/env node
// Streaming CPU per event of two or more server builds, interleaved in one run (an A/B of a change):
//   node bench/stream-ab.mjs [--rounds N] [--events N] [--json] --build NAME=PATH --build NAME=PATH ...
// PATH is a server bundle directory (with its sandbox-agent.mjs: copy packages/server/bundle aside
// after `npm run bundle -w @sandbox-agent/server` to keep a build) or a server entry script, e.g.
// packages/server/dist/src/cli.js. Each server is started once (on disk, its own data directory)
// and warmed by one turn; then each of --rounds (default 8) runs one turn per server, in alternating
// order, each on a new connection: a `chunks 2000` warm-up, then a `chunks N` turn (--events,
// default 200000) read by the same client as rust-peer.mjs (the minimal splitter, JSON.parse of
// every event, the order checked). CPU from /proc/PID/task/*/schedstat (every thread, in ns, where
// /proc/PID/stat counts 10 ms ticks) for the server and its agent, process.cpuUsage() for the
// client; per-round figures go to stderr, medians to stdout, with the load average before and after.
import { readdirSync, readFileSync } from "node:fs";
import { loadavg } from "node:os";
import path from "node:path";
import { tempDir } from "@sandbox-agent/testkit";
import { benchArgs, rpcConnection, runMain, startNode, usageFail } from "./common.mjs";

const args = benchArgs(import.meta.url, {
  rounds: { type: "string", default: "8" },
  events: { type: "string", default: "200000" },
  build: { type: "string", multiple: true, default: [] },
});
const ROUNDS = Number(args.rounds);
const EVENTS = Number(args.events);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) usageFail(import.meta.url, `--rounds takes a whole number ≥ 1`);
if (!Number.isInteger(EVENTS) || EVENTS < 1) usageFail(import.meta.url, `--events takes a whole number ≥ 1`);
const builds = args.build.map((build) => {
  const at = build.indexOf("=");
  if (at < 1) usageFail(import.meta.url, `--build takes NAME=PATH, not "${build}"`);
  return [build.slice(0, at), path.resolve(build.slice(at + 1))];
});
if (builds.length < 1) usageFail(import.meta.url, "name at least one build: --build NAME=PATH");

/** CPU time of every thread of `pid` so far, in ns. */
function cpuNs(pid) {
  let ns = 0;
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, "utf8").split(" ")[0]);
    } catch {
      // The thread ended in between.
    }
  }
  return ns;
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

async function main() {
  const servers = {};
  for (const [name, where] of builds) {
    const entry = /\.m?js$/.test(where) ? where : path.join(where, "sandbox-agent.mjs");
    const command = [entry, "server", "--port", "0", "--log-level", "warn"];
    servers[name] = await startNode(command, { ...process.env, SANDBOX_AGENT_DATA_DIR: tempDir() });
  }
  const loadBefore = loadavg();
  for (const [name] of builds) await turn(servers[name]);
  const rounds = Object.fromEntries(builds.map(([name]) => [name, []]));
  for (let i = 0; i < ROUNDS; i++) {
    for (const [name] of i % 2 ? [...builds].reverse() : builds) {
      const result = await turn(servers[name]);
      rounds[name].push(result);
      const round = (x) => (typeof x === "number" ? Math.round(x * 100) / 100 : x);
      if (!args.json)
        console.error(
          `round ${i + 1} ${name}`,
          JSON.stringify(result, (_k, v) => round(v)),
        );
    }
  }
  for (const [name] of builds) servers[name].stop();
  const median = (name, key) => {
    const sorted = rounds[name].map((r) => r[key]).sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  };
  const summary = {
    load: { before: loadBefore, after: loadavg() },
    builds: Object.fromEntries(
      builds.map(([name, where]) => [
        name,
        {
          path: where,
          eventsPerSec: Math.round(median(name, "eventsPerSec")),
          serverUsPerEvent: Number(median(name, "serverUs").toFixed(3)),
          agentUsPerEvent: Number(median(name, "agentUs").toFixed(3)),
          clientUsPerEvent: Number(median(name, "clientUs").toFixed(3)),
          serverUsPerRound: rounds[name].map((r) => Number(r.serverUs.toFixed(3))),
          lost: rounds[name].reduce((sum, r) => sum + r.lost, 0),
          inOrder: rounds[name].every((r) => r.ordered),
        },
      ]),
    ),
  };
  if (args.json) return console.log(JSON.stringify(summary, null, 2));
  const fmt = (xs) => xs.map((x) => x.toFixed(2)).join(" ");
  console.log(`load average ${fmt(summary.load.before)} → ${fmt(summary.load.after)}`);
  for (const [name, b] of Object.entries(summary.builds))
    console.log(
      `${name}: ${b.eventsPerSec} updates/s, server ${b.serverUsPerEvent} µs/event (rounds ${fmt(b.serverUsPerRound)}), ` +
        `agent ${b.agentUsPerEvent}, client ${b.clientUsPerEvent}; lost ${b.lost}, in order ${b.inOrder}`,
    );
}

runMain(main);
