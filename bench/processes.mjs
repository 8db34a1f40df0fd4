#!/usr/bin/env node
// Benchmark of the process API (/v2/processes), each figure against a baseline measured in the
// same run without the server: spawning the same command from this process, the same terminal
// mechanism (script(1)) driven directly, the same output read from a pipe.
//   node bench/processes.mjs [--quick] [--json]
import { spawn } from "node:child_process";
import http from "node:http";
import { WebSocket } from "ws";
import { benchArgs, cpuMs, percentile, runMain, sseSplitter, startServer } from "./common.mjs";

const args = benchArgs(import.meta.url, { quick: { type: "boolean" } });
const quick = args.quick;
const asJson = args.json;
const RUNS = quick ? 100 : 300;
const KEYSTROKES = quick ? 300 : 1000;
const FOLLOW_BYTES = (quick ? 64 : 256) * 2 ** 20;
const WARMUP = 20;
const log = (...a) => !asJson && console.error(...a);
const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 4 });

function post(url, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: "POST", agent: keepAlive, headers: { "content-type": "application/json" } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (text += d));
        res.on("end", () =>
          res.statusCode < 300 ? resolve(text && JSON.parse(text)) : reject(new Error(text)),
        );
      },
    );
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

/** p50/p99 of `n` timed calls of `once` after a warm-up. */
async function latency(n, once) {
  for (let i = 0; i < WARMUP; i++) await once();
  const times = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    await once();
    times.push(performance.now() - started);
  }
  return { p50: percentile(times, 50), p99: percentile(times, 99) };
}

/** Spawns `true` the way the server does (pipes, own process group) and waits for it to be gone. */
function spawnTrue() {
  return new Promise((resolve) =>
    spawn("true", [], { stdio: "pipe", detached: true, env: { PATH: process.env.PATH } }).once(
      "close",
      resolve,
    ),
  );
}

/**
 * Keystroke → echo: one byte in, its echo out. The terminal runs `cat` with canonical mode off,
 * so the line discipline echoes every key at once and `cat` swallows the input.
 */
const ECHO_COMMAND = "stty -icanon; exec cat > /dev/null";

async function keystrokes(send, onData, n) {
  let waiting;
  onData(() => waiting?.());
  return latency(n, () => new Promise((resolve) => ((waiting = resolve), send())));
}

/** The same terminal driven directly: script(1) from this process, no server. */
async function directTerminal() {
  const child = spawn("script", ["-qfec", ECHO_COMMAND, "/dev/null"], {
    stdio: "pipe",
    detached: true,
    env: { PATH: process.env.PATH, TERM: "xterm-256color" },
  });
  await new Promise((resolve) => setTimeout(resolve, 300)); // stty has run
  const result = await keystrokes(
    () => child.stdin.write("x"),
    (listener) => child.stdout.on("data", listener),
    KEYSTROKES,
  );
  process.kill(-child.pid, "SIGKILL");
  return result;
}

async function serverTerminal(url) {
  const proc = await post(`${url}/v2/processes`, { command: "sh", args: ["-c", ECHO_COMMAND], tty: true });
  const ws = new WebSocket(`${url.replace("http", "ws")}/v2/processes/${proc.id}/terminal`);
  await new Promise((resolve, reject) => (ws.once("open", resolve), ws.once("error", reject)));
  await new Promise((resolve) => setTimeout(resolve, 300));
  const key = Buffer.from("x");
  const result = await keystrokes(
    () => ws.send(key),
    (listener) => ws.on("message", listener),
    KEYSTROKES,
  );
  ws.close();
  await post(`${url}/v2/processes/${proc.id}/kill`);
  return result;
}

/** `bytes` of text on stdout, as fast as the shell tools make it. */
const producer = (bytes) => `head -c ${bytes} /dev/zero | tr '\\0' x`;

async function directPipe() {
  const started = performance.now();
  const child = spawn("sh", ["-c", producer(FOLLOW_BYTES)], { stdio: ["ignore", "pipe", "ignore"] });
  let bytes = 0;
  for await (const chunk of child.stdout) bytes += chunk.length;
  return rate(bytes, started);
}

function rate(bytes, started) {
  const seconds = (performance.now() - started) / 1000;
  return { bytes, seconds, mbPerSecond: bytes / 2 ** 20 / seconds };
}

/**
 * Follows a process' logs over SSE and decodes every chunk the way a client must (split events,
 * JSON.parse, base64 or UTF-8 data); the process waits for input so the follower is attached first.
 */
async function follow(url, encoding, serverPid) {
  const proc = await post(`${url}/v2/processes`, {
    command: "sh",
    args: ["-c", `read go; ${producer(FOLLOW_BYTES)}`],
  });
  const res = await new Promise((resolve, reject) =>
    http
      .get(`${url}/v2/processes/${proc.id}/logs?follow=true&encoding=${encoding}`, resolve)
      .on("error", reject),
  );
  const started = performance.now();
  const cpuBefore = cpuMs(serverPid);
  const clientBefore = process.cpuUsage();
  await post(`${url}/v2/processes/${proc.id}/input`, { data: "go\n" });
  let bytes = 0;
  let exited = false;
  const feed = sseSplitter((event, data) => {
    const chunk = JSON.parse(data);
    if (event === "exit") exited = true;
    else
      bytes +=
        encoding === "base64" ? Buffer.from(chunk.data, "base64").length : Buffer.byteLength(chunk.data);
  });
  res.setEncoding("utf8");
  for await (const text of res) feed(text);
  if (!exited || bytes !== FOLLOW_BYTES) throw new Error(`follow lost output: ${bytes} of ${FOLLOW_BYTES}`);
  const client = process.cpuUsage(clientBefore);
  const mb = bytes / 2 ** 20;
  const result = {
    ...rate(bytes, started),
    // CPU time per MiB is steadier than rates on a shared machine.
    serverCpuMsPerMB: (cpuMs(serverPid) - cpuBefore) / mb,
    clientCpuMsPerMB: (client.user + client.system) / 1000 / mb,
  };
  await post(`${url}/v2/processes/${proc.id}/kill`);
  return result;
}

async function main() {
  log("starting server…");
  const server = await startServer();

  log(`run of \`true\`: spawned here, then POST /v2/processes/run (${RUNS} each)…`);
  const spawnDirect = await latency(RUNS, spawnTrue);
  const runServer = await latency(RUNS, () => post(`${server.url}/v2/processes/run`, { command: "true" }));

  log(`keystroke → echo: script(1) driven here, then a terminal over the WebSocket (${KEYSTROKES} each)…`);
  const echoDirect = await directTerminal();
  const echoServer = await serverTerminal(server.url);

  log(`follow-logs throughput: ${FOLLOW_BYTES / 2 ** 20} MiB from a pipe here, then over SSE…`);
  const pipe = await directPipe();
  const sseBase64 = await follow(server.url, "base64", server.child.pid);
  const sseUtf8 = await follow(server.url, "utf8", server.child.pid);
  server.stop();

  const results = {
    node: process.version,
    run: { direct: spawnDirect, server: runServer },
    keystrokeEcho: { direct: echoDirect, server: echoServer },
    follow: { bytes: FOLLOW_BYTES, pipe, sseBase64, sseUtf8 },
  };
  if (asJson) return console.log(JSON.stringify(results, null, 2));
  const f = (n, d = 2) => n.toFixed(d);
  const pct = (a, b) => `${f((a / b) * 100, 1)} %`;
  console.log(`
| metric | baseline (no server) | through server | overhead / ratio | target |
| --- | --- | --- | --- | --- |
| \`run\` of \`true\` round trip p50 (ms) | ${f(spawnDirect.p50)} | ${f(runServer.p50)} | +${f(runServer.p50 - spawnDirect.p50)} ms | ≤ 5 ms |
| \`run\` of \`true\` round trip p99 (ms) | ${f(spawnDirect.p99)} | ${f(runServer.p99)} | +${f(runServer.p99 - spawnDirect.p99)} ms | |
| keystroke → echo p50 (ms) | ${f(echoDirect.p50, 3)} | ${f(echoServer.p50, 3)} | +${f(echoServer.p50 - echoDirect.p50, 3)} ms | ≤ 5 ms |
| keystroke → echo p99 (ms) | ${f(echoDirect.p99, 3)} | ${f(echoServer.p99, 3)} | +${f(echoServer.p99 - echoDirect.p99, 3)} ms | |
| follow-logs, base64 (MB/s) | ${f(pipe.mbPerSecond, 0)} | ${f(sseBase64.mbPerSecond, 0)} | ${pct(sseBase64.mbPerSecond, pipe.mbPerSecond)} | ≥ 50 MB/s |
| follow-logs, utf8 (MB/s) | ${f(pipe.mbPerSecond, 0)} | ${f(sseUtf8.mbPerSecond, 0)} | ${pct(sseUtf8.mbPerSecond, pipe.mbPerSecond)} | ≥ 50 MB/s |
| follow-logs CPU per MiB, base64: server / client (ms) | | ${f(sseBase64.serverCpuMsPerMB, 1)} / ${f(sseBase64.clientCpuMsPerMB, 1)} | | |
| follow-logs CPU per MiB, utf8: server / client (ms) | | ${f(sseUtf8.serverCpuMsPerMB, 1)} / ${f(sseUtf8.clientCpuMsPerMB, 1)} | | |
`);
}

runMain(main);
