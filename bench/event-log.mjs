#!/usr/bin/env node
// Benchmark: the server's event log on disk. Recovery: start → healthy on a data directory holding
// many connections' logs (after a clean stop, after SIGKILL, and with the index's tail marks removed
// so that every last segment is read in full), against the same server on an empty one. Memory: the server's RSS across
// one large turn with the log on disk, against the same turn with `--in-memory`.
//   node bench/event-log.mjs [--quick] [--json] [--recovery | --turn-only] [--server-args "ARGS"]
// --recovery: the recovery table only; --turn-only skips recovery; --server-args adds node options to
// the server's command line (for example "--max-semi-space-size=4", to see what the young generation's
// size does to RSS).
import { randomBytes, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { tempDir } from "@sandbox-agent/testkit";
import { runMain, serverNodeArgs, startServer } from "./common.mjs";
import { DEFAULT_EVENT_LOG_OPTIONS, diskStore } from "../packages/server/dist/src/store/event-store.js";

const quick = process.argv.includes("--quick");
const asJson = process.argv.includes("--json");
const recoveryOnly = process.argv.includes("--recovery");
const CONNECTIONS = quick ? 100 : 1000;
const LOG_BYTES = (quick ? 100 : 1024) * 2 ** 20;
const TURN_BYTES = (quick ? 50 : 200) * 2 ** 20;
const ROUNDS = 3;
const turnOnly = process.argv.includes("--turn-only");
const nodeArgs = serverNodeArgs();

const rss = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]) * 1024;
const log = (...a) => !asJson && console.error(...a);
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const mb = (bytes) => bytes / 2 ** 20;

/** Writes what a server would leave: `CONNECTIONS` connection records and logs of `LOG_BYTES` in all. */
function fillDataDir(dataDir) {
  const store = diskStore(dataDir, DEFAULT_EVENT_LOG_OPTIONS, (message) => console.error(message));
  const records = store.table("connections");
  const event = (seq) =>
    JSON.stringify({
      jsonrpc: "2.0",
      method: "session/update",
      params: {
        sessionId: "s",
        update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: `chunk ${seq} ` } },
      },
    });
  const perConnection = LOG_BYTES / CONNECTIONS;
  for (let i = 0; i < CONNECTIONS; i++) {
    const id = randomUUID();
    const connectionLog = store.createLog(id, { maxEvents: 1000, maxBytes: 1 << 20 });
    for (let bytes = 0, seq = 1; bytes < perConnection;) {
      for (let n = 0; n < 500; n++, seq++) {
        const data = event(seq);
        connectionLog.append(data, "utf8");
        bytes += data.length;
      }
      connectionLog.commit();
    }
    connectionLog.close();
    records.set(id, {
      agentId: "mock",
      epoch: randomBytes(4).toString("hex"),
      createdAt: new Date().toISOString(),
      initialize: { jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: 1 } },
      protocolVersion: 1,
      reattach: "session/load",
      sessions: {},
      pending: [],
    });
  }
  store.close();
}

/** Drops the tail marks from the index: the next start reads every log's last segment in full. */
function forgetTailMarks(dataDir) {
  const store = diskStore(dataDir, DEFAULT_EVENT_LOG_OPTIONS, (message) => console.error(message));
  const tails = store.table("tails");
  for (const id of [...tails.entries()].map(([key]) => key)) tails.delete(id);
  store.close();
}

/** Starts a server on `dataDir`, checks it recovered everything, stops it with `signal`. */
async function startOn(dataDir, signal) {
  const server = await startServer(["--data-dir", dataDir]);
  const recovered = (await (await fetch(`${server.url}/v2/health`)).json()).connections;
  await new Promise((resolve) => {
    server.child.once("exit", resolve);
    server.child.kill(signal);
  });
  return { ms: server.startMs, recovered };
}

async function recovery() {
  const dataDir = tempDir("bench-event-log-");
  log(`writing ${CONNECTIONS} connections, ${mb(LOG_BYTES).toFixed(0)} MB of logs…`);
  const t = performance.now();
  fillDataDir(dataDir);
  const fillSeconds = (performance.now() - t) / 1000;
  const empty = [];
  const clean = [];
  const killed = [];
  const unmarked = [];
  let recovered = CONNECTIONS;
  const count = (r) => {
    recovered = Math.min(recovered, r.recovered);
    return r.ms;
  };
  for (let round = 1; round <= ROUNDS; round++) {
    log(
      `recovery round ${round}/${ROUNDS}: empty data directory, after a clean stop, after SIGKILL, without marks…`,
    );
    empty.push((await startOn(tempDir("bench-empty-"), "SIGTERM")).ms);
    // The fill (and each round) ended with a clean stop; this start ends with SIGKILL.
    clean.push(count(await startOn(dataDir, "SIGKILL")));
    killed.push(count(await startOn(dataDir, "SIGTERM")));
    forgetTailMarks(dataDir);
    unmarked.push(count(await startOn(dataDir, "SIGTERM")));
  }
  return {
    fillSeconds,
    emptyMs: median(empty),
    cleanMs: median(clean),
    killedMs: median(killed),
    unmarkedMs: median(unmarked),
    recovered,
  };
}

/** One turn of about `TURN_BYTES`, read to its end over SSE; the server's RSS sampled every 50 ms. */
async function bigTurn(extraArgs) {
  const server = await startServer(extraArgs, undefined, nodeArgs);
  const post = (body, id) =>
    fetch(`${server.url}/v2/rpc`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(id ? { "acp-connection-id": id } : {}) },
      body: JSON.stringify(body),
    });
  const init = await post({
    jsonrpc: "2.0",
    id: 0,
    method: "initialize",
    params: { protocolVersion: 1, _meta: { "sandboxagent.dev": { agent: "mock" } } },
  });
  const id = init.headers.get("acp-connection-id");
  await init.arrayBuffer();
  const sse = await fetch(`${server.url}/v2/rpc`, {
    headers: { accept: "text/event-stream", "acp-connection-id": id },
  });
  const reader = sse.body.getReader();
  const decoder = new TextDecoder();
  let bytes = 0;
  /** Reads until `marker`; returns the text from its start (only the tail is kept for long streams). */
  const until = async (marker) => {
    let text = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error("the stream ended");
      bytes += value.length;
      text = (text + decoder.decode(value, { stream: true })).slice(-64 * 1024);
      const at = text.indexOf(marker);
      if (at !== -1) return text.slice(at);
    }
  };
  await (
    await post({ jsonrpc: "2.0", id: 1, method: "session/new", params: { cwd: "/tmp", mcpServers: [] } }, id)
  ).arrayBuffer();
  const created = await until('"id":1,"result"');
  const sessionId = /"sessionId":"([^"]+)"/.exec(created)[1];
  const pad = "x".repeat(400);
  const count = Math.round(TURN_BYTES / 520);
  const base = rss(server.child.pid);
  let peak = base;
  const sampler = setInterval(() => (peak = Math.max(peak, rss(server.child.pid))), 50);
  const t = performance.now();
  bytes = 0;
  await (
    await post(
      {
        jsonrpc: "2.0",
        id: 2,
        method: "session/prompt",
        params: { sessionId, prompt: [{ type: "text", text: `chunks ${count} ${pad}` }] },
      },
      id,
    )
  ).arrayBuffer();
  const answer = await until('"id":2,');
  if (!answer.startsWith('"id":2,"result"')) throw new Error(`the turn failed: ${answer.slice(0, 300)}`);
  clearInterval(sampler);
  const seconds = (performance.now() - t) / 1000;
  const end = rss(server.child.pid);
  await reader.cancel();
  server.stop();
  return { streamedMB: mb(bytes), seconds, baseRssMB: mb(base), peakRssMB: mb(peak), endRssMB: mb(end) };
}

async function main() {
  const rec = turnOnly ? undefined : await recovery();
  if (recoveryOnly) return printRecovery(rec);
  log(`a ${mb(TURN_BYTES).toFixed(0)} MB turn, event log in memory, then on disk…`);
  const memory = await bigTurn(["--in-memory"]);
  const disk = await bigTurn([]);
  const results = { connections: CONNECTIONS, logMB: mb(LOG_BYTES), recovery: rec, turn: { memory, disk } };
  if (asJson) {
    console.log(JSON.stringify(results, null, 2));
    return;
  }
  const row = (name, r) =>
    `| ${name} | ${f(r.streamedMB, 0)} MB in ${f(r.seconds)} s | ${f(r.baseRssMB)} | ${f(r.peakRssMB)} (+${f(r.peakRssMB - r.baseRssMB)}) | ${f(r.endRssMB)} |`;
  console.log(`
| ${mb(TURN_BYTES).toFixed(0)} MB turn | streamed | RSS before (MB) | RSS peak (MB) | RSS after (MB) |
| --- | --- | --- | --- | --- |
${row("in memory", memory)}
${row("on disk", disk)}`);
  if (rec !== undefined) printRecovery(rec);
}

const f = (n, d = 1) => n.toFixed(d);

function printRecovery(rec) {
  if (asJson)
    return console.log(
      JSON.stringify({ connections: CONNECTIONS, logMB: mb(LOG_BYTES), recovery: rec }, null, 2),
    );
  console.log(`
| recovery (${CONNECTIONS} connections, ${f(mb(LOG_BYTES), 0)} MB of logs), start → healthy, median of ${ROUNDS} (ms) | empty data dir | after a clean stop | after SIGKILL | without tail marks (every last segment read) | recovered |
| --- | --- | --- | --- | --- | --- |
| | ${f(rec.emptyMs, 0)} | ${f(rec.cleanMs, 0)} (+${f(rec.cleanMs - rec.emptyMs, 0)}) | ${f(rec.killedMs, 0)} (+${f(rec.killedMs - rec.emptyMs, 0)}) | ${f(rec.unmarkedMs, 0)} (+${f(rec.unmarkedMs - rec.emptyMs, 0)}) | ${rec.recovered} of ${CONNECTIONS} |
`);
}

runMain(main);
