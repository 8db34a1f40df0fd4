#!/usr/bin/env node
// Benchmark: the server's event log on disk. Recovery: start → healthy on a data directory holding
// many connections' logs (after a clean stop, after SIGKILL, and with the index's tail marks removed
// so that every last segment is read in full), against the same server on an empty one. Memory: the server's RSS across
// one large turn with the log on disk, against the same turn with `--in-memory`.
//   node bench/event-log.mjs [--quick] [--json] [--recovery | --turn-only] [--server-args "ARGS"] [--cap-young MIB]
// --recovery: the recovery table only; --turn-only skips recovery; --server-args adds node options to
// the server's command line (for example "--max-semi-space-size=4", to see what the young generation's
// size does to RSS). The servers cap their young generation at 8 MiB themselves;
// SANDBOX_AGENT_YOUNG_GENERATION_MIB in the environment sets it (0: no cap).
import { randomBytes, randomUUID } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { tempDir } from "@sandbox-agent/testkit";
import { benchArgs, cpuMs, runMain, splitNodeArgs, startNode, startServer } from "./common.mjs";
import { DEFAULT_EVENT_LOG_OPTIONS, diskStore } from "../packages/server/dist/src/store/event-store.js";

const args = benchArgs(import.meta.url, {
  quick: { type: "boolean" },
  recovery: { type: "boolean" },
  "turn-only": { type: "boolean" },
  "server-args": { type: "string" },
  "cap-young": { type: "string" },
});
const quick = args.quick;
const asJson = args.json;
const recoveryOnly = args.recovery;
const CONNECTIONS = quick ? 100 : 1000;
const LOG_BYTES = (quick ? 100 : 1024) * 2 ** 20;
const TURN_BYTES = (quick ? 50 : 200) * 2 ** 20;
const ROUNDS = 3;
const turnOnly = args["turn-only"];
const nodeArgs = splitNodeArgs(args["server-args"]);

const PROBE = fileURLToPath(new URL("./memory-probe.mjs", import.meta.url));
const FLOOR = fileURLToPath(new URL("./floor-server.mjs", import.meta.url));
const rss = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]) * 1024;
const log = (...a) => !asJson && console.error(...a);
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const mb = (bytes) => bytes / 2 ** 20;

/** The servers started, stopped when the bench exits (after a failure too). */
const started = [];
process.on("exit", () => {
  for (const child of started) if (child.exitCode === null) child.kill();
});
const SETTLE_MS = quick ? 2000 : 10_000;
const TURN_ROUNDS = quick ? 1 : 2;
// --cap-young MIB: the servers' memory probe stops V8's young generation growing past MIB from
// inside the process (see memory-probe.mjs), as `--max-semi-space-size=MIB/2` on node's command line would.
const capYoung = args["cap-young"] ?? "";
if (capYoung) process.env.SANDBOX_AGENT_PROBE_YOUNG_MIB = capYoung;

/** Resident KiB of /proc/PID/smaps, split into file-backed (code, libraries), anonymous and malloc's brk heap. */
function residentMappings(pid) {
  const out = { file: 0, anon: 0, brk: 0 };
  let kind = "anon";
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ (\d+)\s*(.*)$/.exec(line);
    if (head)
      kind = head[2] === "[heap]" ? "brk" : head[1] !== "0" && head[2].startsWith("/") ? "file" : "anon";
    else if (line.startsWith("Rss:")) out[kind] += Number(/(\d+)/.exec(line)[1]) / 1024;
  }
  return out;
}

/**
 * `probe()` asks the server's memory probe (`memory-probe.mjs`) for its figures now and at its
 * highest RSS since the last call, and adds the resident mappings.
 */
function memoryProbe(pid, file) {
  let lines = 0;
  return async () => {
    process.kill(pid, "SIGUSR2");
    for (const until = Date.now() + 5000; Date.now() < until;) {
      const all = existsSync(file) ? readFileSync(file, "utf8").trim().split("\n") : [];
      if (all.length > lines) {
        const report = JSON.parse(all[(lines = all.length) - 1]);
        report.now.mappings = residentMappings(pid);
        return report;
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error("the server's memory probe did not answer");
  };
}

/** A phase's RSS broken down (MiB): V8's new space, the rest of V8's heap, off-heap buffers, the rest. */
function breakdown(p) {
  const heap = p.heapCommitted;
  const newSpace = p.spaces.new.committed;
  return {
    rss: p.rss,
    newSpace,
    oldSpaces: heap - newSpace,
    heapUsed: p.heapUsed,
    arrayBuffers: p.arrayBuffers,
    otherExternal: p.external - p.arrayBuffers,
    // Code and libraries, Node's and V8's native structures, malloc's free lists and fragmentation, stacks.
    rest: p.rss - heap - p.external,
    brk: p.mappings?.brk,
    file: p.mappings?.file,
  };
}

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
const REPLAY_TAIL = 9000;

/**
 * Reads the events after `epoch.fromSeq` through `toSeq` again (`Last-Event-ID`), checking that
 * each arrives once and in order; returns their MB and the time taken.
 */
async function replayFrom(url, id, epoch, fromSeq, toSeq) {
  const t = performance.now();
  const get = () =>
    fetch(`${url}/v2/rpc`, {
      headers: {
        accept: "text/event-stream",
        "acp-connection-id": id,
        "last-event-id": `${epoch}.${fromSeq}`,
      },
    });
  let response = await get();
  if (response.status === 410) {
    // Retention (128 MiB per connection) deleted the turn's oldest segments: from the oldest kept.
    fromSeq = Number((await response.json()).oldestEventId.split(".")[1]);
    response = await get();
  }
  if (response.status !== 200) throw new Error(`replay: ${response.status} ${await response.text()}`);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let expected = fromSeq + 1;
  let bytes = 0;
  let rest = "";
  while (expected <= toSeq) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`replay: the stream ended at ${expected}`);
    bytes += value.length;
    const lines = (rest + decoder.decode(value, { stream: true })).split("\n");
    rest = lines.pop();
    for (const line of lines) {
      if (!line.startsWith("id: ") || line === `id: ${epoch}.${fromSeq}`) continue;
      if (line !== `id: ${epoch}.${expected}`) throw new Error(`replay: ${line} where ${expected} was due`);
      expected++;
    }
  }
  const ms = performance.now() - t;
  await reader.cancel();
  return { events: toSeq - fromSeq, MB: mb(bytes), ms };
}

/**
 * The floor: the same turn carried by `floor-server.mjs` (agent stdout split into lines, each
 * written to the SSE response, nothing else), its RSS sampled the same way.
 */
async function floorTurn() {
  const probeFile = `${tempDir("bench-probe-")}/probe.jsonl`;
  const server = await startNode(["--import", PROBE, ...nodeArgs, FLOOR], {
    ...process.env,
    SANDBOX_AGENT_MEMORY_PROBE: probeFile,
  });
  started.push(server.child);
  const probe = memoryProbe(server.child.pid, probeFile);
  const turn = await measureTurn(server.child.pid, probe);
  const prompt = `chunks ${Math.round(TURN_BYTES / 520)} ${"x".repeat(400)}`;
  const response = await fetch(`${server.url}/?prompt=${encodeURIComponent(prompt)}`);
  let bytes = 0;
  for await (const chunk of response.body) bytes += chunk.length;
  return settleAndStop(server, probe, turn.phases, await turn.stop(bytes));
}

async function bigTurn(extraArgs, config, replay = false) {
  const probeFile = `${tempDir("bench-probe-")}/probe.jsonl`;
  process.env.SANDBOX_AGENT_MEMORY_PROBE = probeFile;
  const server = await startServer(extraArgs, config, ["--import", PROBE, ...nodeArgs]);
  started.push(server.child);
  const probe = memoryProbe(server.child.pid, probeFile);
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
  /** The id of the last event `text` starts before `at`. */
  const idBefore = (text, at) => [...text.slice(0, at).matchAll(/^id: (\w+)\.(\d+)$/gm)].at(-1);
  let lastId;
  /** Reads until `marker`; returns the text from its start (only the tail is kept for long streams). */
  const until = async (marker) => {
    let text = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error("the stream ended");
      bytes += value.length;
      text = (text + decoder.decode(value, { stream: true })).slice(-64 * 1024);
      const at = text.indexOf(marker);
      if (at !== -1) {
        lastId = idBefore(text, at);
        return text.slice(at);
      }
    }
  };
  await (
    await post({ jsonrpc: "2.0", id: 1, method: "session/new", params: { cwd: "/tmp", mcpServers: [] } }, id)
  ).arrayBuffer();
  const created = await until('"id":1,"result"');
  const sessionId = /"sessionId":"([^"]+)"/.exec(created)[1];
  const [, epoch, startSeq] = lastId;
  const pad = "x".repeat(400);
  const count = Math.round(TURN_BYTES / 520);
  const turn = await measureTurn(server.child.pid, probe);
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
  const figures = await turn.stop(bytes);
  const lastSeq = Number(lastId[2]);
  const { phases } = turn;
  await reader.cancel();
  let replays;
  if (replay) {
    // A reader that fell behind reconnects: the last REPLAY_TAIL events (in the runtime's replay
    // window of 10,000), then the whole turn as far as retention keeps it (only the log on disk has it).
    const tail = await replayFrom(server.url, id, epoch, lastSeq - REPLAY_TAIL, lastSeq);
    // Retention is also checked every second: past it, what it deletes is gone (a reader on it
    // would be ended, and told 410 on its reconnect).
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const whole = await replayFrom(server.url, id, epoch, Number(startSeq), lastSeq);
    replays = { tail, whole };
    phases.replayed = (await probe()).now;
  }
  return settleAndStop(server, probe, phases, { ...figures, replays });
}

/**
 * Starts measuring a turn: the process's figures now, its RSS every 50 ms; `stop(bytes)` ends it
 * (peak and end phases) and returns the turn's figures.
 */
async function measureTurn(pid, probe) {
  const phases = { before: (await probe()).now };
  const base = rss(pid);
  let peak = base;
  const sampler = setInterval(() => (peak = Math.max(peak, rss(pid))), 50);
  const t = performance.now();
  const cpuBefore = cpuMs(pid);
  const stop = async (bytes) => {
    clearInterval(sampler);
    const seconds = (performance.now() - t) / 1000;
    // The process's CPU time per streamed MB: what a young-generation cap costs (more scavenges).
    const cpuMsPerMB = (cpuMs(pid) - cpuBefore) / mb(bytes);
    const end = rss(pid);
    const during = await probe();
    phases.peak = during.peak;
    phases.end = during.now;
    return {
      streamedMB: mb(bytes),
      seconds,
      cpuMsPerMB,
      baseRssMB: mb(base),
      peakRssMB: mb(peak),
      endRssMB: mb(end),
    };
  };
  return { phases, stop };
}

/** After the turn: what the idle process still holds `SETTLE_MS` later; then stops it. */
async function settleAndStop(server, probe, phases, figures) {
  // An idle process runs no GC of its own: what it holds now is what it keeps.
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  phases.settled = (await probe()).now;
  const settledRssMB = mb(rss(server.child.pid));
  server.stop();
  return { ...figures, settledRssMB, phases };
}

async function main() {
  const rec = turnOnly ? undefined : await recovery();
  if (recoveryOnly) return printRecovery(rec);
  log(`a ${mb(TURN_BYTES).toFixed(0)} MB turn: event log in memory, on disk with a 16 MiB window, on disk…`);
  // A window of 16 MiB is what the log on disk kept in memory before `eventLog.windowBytes` (default
  // 1 MiB): the same tree, interleaved. Both load a config file (which loads zod), so that they differ
  // in the window alone.
  const window = (bytes) => ({ eventLog: { windowBytes: bytes } });
  const turns = [];
  for (let round = 1; round <= TURN_ROUNDS; round++) {
    turns.push(["floor: bare Node pipe", await floorTurn()]);
    turns.push(["in memory", await bigTurn(["--in-memory"])]);
    turns.push(["on disk, 16 MiB window (before)", await bigTurn([], window(16 * 2 ** 20), true)]);
    turns.push(["on disk, 1 MiB window (default)", await bigTurn([], window(2 ** 20), true)]);
  }
  const results = { connections: CONNECTIONS, logMB: mb(LOG_BYTES), recovery: rec, turns };
  if (asJson) {
    console.log(JSON.stringify(results, null, 2));
    return;
  }
  const row = ([name, r]) =>
    `| ${name} | ${f(r.streamedMB, 0)} MB in ${f(r.seconds)} s | ${f(r.cpuMsPerMB)} | ${f(r.baseRssMB)} | ${f(r.peakRssMB)} (+${f(r.peakRssMB - r.baseRssMB)}) | ${f(r.endRssMB)} | ${f(r.settledRssMB)} | ${replayCell(r.replays)} |`;
  console.log(`
| ${mb(TURN_BYTES).toFixed(0)} MB turn | streamed | CPU (ms per MB) | RSS before (MB) | RSS peak (MB) | RSS at the end | ${SETTLE_MS / 1000} s later | replay: last ${REPLAY_TAIL} events; all the log keeps (MB/s) |
| --- | --- | --- | --- | --- | --- | --- | --- |
${turns.map(row).join("\n")}`);
  printBreakdown(turns);
  if (rec !== undefined) printRecovery(rec);
}

const replayCell = (r) =>
  r === undefined
    ? ""
    : `${f(r.tail.ms, 0)} ms (${f(r.tail.MB / (r.tail.ms / 1000), 0)}); ${f(r.whole.ms, 0)} ms (${f(r.whole.MB / (r.whole.ms / 1000), 0)})`;

/** Per turn and phase, what the server's RSS is made of (from its memory probe and /proc). */
function printBreakdown(turns) {
  console.log(`
| turn | phase | RSS | V8 new space | V8 other spaces (used) | ArrayBuffers | other external | rest: code, native, malloc (of it: brk heap, file-backed) |
| --- | --- | --- | --- | --- | --- | --- | --- |`);
  for (const [name, turn] of turns)
    for (const [phase, p] of Object.entries(turn.phases)) {
      const b = breakdown(p);
      const maps = b.brk === undefined ? "" : ` (${f(b.brk)}, ${f(b.file)})`;
      console.log(
        `| ${name} | ${phase} | ${f(b.rss)} | ${f(b.newSpace)} | ${f(b.oldSpaces)} (${f(b.heapUsed - p.spaces.new.used)}) | ${f(b.arrayBuffers)} | ${f(b.otherExternal)} | ${f(b.rest)}${maps} |`,
      );
    }
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
