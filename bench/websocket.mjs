// The WebSocket transport against HTTP + SSE on the same server in the same run: streaming
// session/update throughput, the server's CPU per streamed event, and the echo prompt round trip.
// Both clients are minimal and do the same work per message (one JSON.parse), so the difference is
// the server's transport (the client's own CPU per event is reported too). Rounds alternate (SSE, WebSocket, SSE, …) and every round checks that
// each update arrived once and in order.
//   node bench/websocket.mjs [--quick] [--json]
import http from "node:http";
import { WebSocket } from "ws";
import { benchArgs, cpuMs, percentile, runMain, sseSplitter, startServer } from "./common.mjs";

const args = benchArgs(import.meta.url, { quick: { type: "boolean" } });
const quick = args.quick;
const asJson = args.json;
const STREAM_EVENTS = quick ? 50_000 : 200_000;
const ROUNDS = quick ? 3 : 5;
/** Echo round trips per transport, measured in alternating blocks after a warm-up. */
const ROUND_TRIPS = quick ? 300 : 1000;
const BLOCK = 100;
const WARM_UP = 50;
const log = (...a) => !asJson && console.error(...a);

const rpc = (id, method, params) => JSON.stringify({ jsonrpc: "2.0", id, method, params });
const INITIALIZE = ["initialize", { protocolVersion: 1, _meta: { "sandboxagent.dev": { agent: "mock" } } }];

/** Requests by id and session/update notifications, whatever carries the frames. */
class RawClient {
  pending = new Map();
  nextId = 1;
  onUpdate = () => {};
  dispatch(text) {
    const message = JSON.parse(text);
    if (message.method === "session/update") this.onUpdate(message);
    else if (this.pending.has(message.id)) {
      this.pending.get(message.id)(message);
      this.pending.delete(message.id);
    }
  }
  request(method, params) {
    const id = this.nextId++;
    const answer = new Promise((resolve) => this.pending.set(id, resolve));
    return Promise.all([answer, this.send(rpc(id, method, params))]).then(([message]) => message);
  }
}

/** POSTs and one SSE stream (`GET /v2/rpc`), node:http on a keep-alive agent. */
class SseClient extends RawClient {
  agent = new http.Agent({ keepAlive: true });
  static async open(baseUrl) {
    const client = new SseClient();
    client.url = `${baseUrl}/v2/rpc`;
    const res = await client.post(rpc(0, ...INITIALIZE));
    client.connectionId = res.headers["acp-connection-id"];
    res.resume();
    const stream = await new Promise((resolve, reject) => {
      client.sse = http.get(
        client.url,
        { headers: { accept: "text/event-stream", "acp-connection-id": client.connectionId } },
        resolve,
      );
      client.sse.on("error", reject);
    });
    stream.setEncoding("utf8").on(
      "data",
      sseSplitter((_event, data) => client.dispatch(data)),
    );
    return client;
  }
  post(body) {
    const headers = { "content-type": "application/json" };
    if (this.connectionId) headers["acp-connection-id"] = this.connectionId;
    return new Promise((resolve, reject) =>
      http
        .request(this.url, { method: "POST", headers, agent: this.agent }, resolve)
        .on("error", reject)
        .end(body),
    );
  }
  async send(body) {
    const res = await this.post(body);
    res.resume();
    if (res.statusCode !== 202) throw new Error(`POST /v2/rpc: ${res.statusCode}`);
  }
  close() {
    this.sse.destroy();
    return new Promise((resolve) =>
      http
        .request(this.url, { method: "DELETE", headers: { "acp-connection-id": this.connectionId } }, (res) =>
          res.resume().on("end", resolve),
        )
        .end(),
    );
  }
}

/** One WebSocket to `/v2/rpc`, one JSON-RPC message per text frame. */
class WsClient extends RawClient {
  static async open(baseUrl) {
    const client = new WsClient();
    client.socket = new WebSocket(`${baseUrl.replace(/^http/, "ws")}/v2/rpc`, { perMessageDeflate: false });
    client.socket.on("message", (data) => client.dispatch(data.toString()));
    await new Promise((resolve, reject) => client.socket.once("open", resolve).once("error", reject));
    client.nextId = 0;
    await client.request(...INITIALIZE);
    return client;
  }
  send(body) {
    this.socket.send(body);
  }
  close() {
    this.socket.close(1000);
    return new Promise((resolve) => this.socket.once("close", resolve));
  }
}

async function newSession(client) {
  const answer = await client.request("session/new", { cwd: process.cwd(), mcpServers: [] });
  return answer.result.sessionId;
}

const prompt = (client, sessionId, text) =>
  client.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });

/** One streamed turn of STREAM_EVENTS updates: rate, the server's CPU for it, loss and order. */
async function streamRound(client, sessionId, serverPid) {
  let count = 0;
  let inOrder = true;
  client.onUpdate = (m) => {
    count++;
    if (m.params.update.content.text !== `chunk ${count} `) inOrder = false;
  };
  const cpuBefore = cpuMs(serverPid);
  const clientBefore = process.cpuUsage();
  const t = performance.now();
  await prompt(client, sessionId, `chunks ${STREAM_EVENTS}`);
  const seconds = (performance.now() - t) / 1000;
  const serverCpuMs = cpuMs(serverPid) - cpuBefore;
  const { user, system } = process.cpuUsage(clientBefore);
  client.onUpdate = () => {};
  const clientCpuMs = (user + system) / 1000;
  return { eventsPerSecond: count / seconds, serverCpuMs, clientCpuMs, lost: STREAM_EVENTS - count, inOrder };
}

async function echoBlock(client, sessionId, count, times) {
  for (let i = 0; i < count; i++) {
    const t = performance.now();
    await prompt(client, sessionId, "echo ping");
    times?.push(performance.now() - t);
  }
}

function summarize(rounds, times) {
  const rates = rounds.map((r) => r.eventsPerSecond).sort((a, b) => a - b);
  const perEventUs = (key) =>
    (rounds.reduce((n, r) => n + r[key], 0) * 1000) / (rounds.length * STREAM_EVENTS);
  return {
    eventsPerSecond: rates[Math.floor(rates.length / 2)],
    rounds: rounds.map((r) => Math.round(r.eventsPerSecond)),
    serverCpuPerEventUs: perEventUs("serverCpuMs"),
    clientCpuPerEventUs: perEventUs("clientCpuMs"),
    lost: rounds.reduce((n, r) => n + r.lost, 0),
    inOrder: rounds.every((r) => r.inOrder),
    echoMs: { p50: percentile(times, 50), p99: percentile(times, 99), count: times.length },
  };
}

async function main() {
  log("starting the server…");
  const server = await startServer();
  const pid = server.child.pid;
  const clients = { sse: await SseClient.open(server.url), websocket: await WsClient.open(server.url) };
  const sessions = {};
  const rounds = { sse: [], websocket: [] };
  const times = { sse: [], websocket: [] };
  for (const [name, client] of Object.entries(clients)) {
    sessions[name] = await newSession(client);
    await echoBlock(client, sessions[name], WARM_UP); // the first turns warm up the JIT
  }
  log(`echo round trips: ${ROUND_TRIPS} per transport, alternating blocks of ${BLOCK}…`);
  for (let done = 0; done < ROUND_TRIPS; done += BLOCK)
    for (const name of Object.keys(clients))
      await echoBlock(clients[name], sessions[name], BLOCK, times[name]);
  for (let round = 1; round <= ROUNDS; round++) {
    log(`streaming round ${round}/${ROUNDS}: ${STREAM_EVENTS} updates over SSE, then over a WebSocket…`);
    for (const name of Object.keys(clients))
      rounds[name].push(await streamRound(clients[name], sessions[name], pid));
  }
  await Promise.all(Object.values(clients).map((c) => c.close()));
  server.stop();

  const sse = summarize(rounds.sse, times.sse);
  const websocket = summarize(rounds.websocket, times.websocket);
  const results = {
    node: process.version,
    events: STREAM_EVENTS,
    rounds: ROUNDS,
    sse,
    websocket,
    ratio: {
      eventsPerSecond: websocket.eventsPerSecond / sse.eventsPerSecond,
      serverCpuPerEvent: websocket.serverCpuPerEventUs / sse.serverCpuPerEventUs,
      echoP50: websocket.echoMs.p50 / sse.echoMs.p50,
      echoP99: websocket.echoMs.p99 / sse.echoMs.p99,
    },
  };
  if (asJson) return console.log(JSON.stringify(results, null, 2));
  const f = (n, d = 2) => n.toFixed(d);
  const row = (label, pick, d, ratio) =>
    `| ${label} | ${f(pick(sse), d)} | ${f(pick(websocket), d)} | ${f(ratio, 2)}× |`;
  console.log(`
| metric (same server, alternating rounds) | HTTP + SSE | WebSocket | WebSocket ÷ SSE |
| --- | --- | --- | --- |
${row(`session/update throughput (events/s, median of ${ROUNDS})`, (r) => r.eventsPerSecond, 0, results.ratio.eventsPerSecond)}
${row("server CPU per streamed event (µs)", (r) => r.serverCpuPerEventUs, 2, results.ratio.serverCpuPerEvent)}
${row("bench client CPU per streamed event (µs)", (r) => r.clientCpuPerEventUs, 2, websocket.clientCpuPerEventUs / sse.clientCpuPerEventUs)}
${row(`echo prompt round trip p50 (ms, ${ROUND_TRIPS} each)`, (r) => r.echoMs.p50, 3, results.ratio.echoP50)}
${row("echo prompt round trip p99 (ms)", (r) => r.echoMs.p99, 3, results.ratio.echoP99)}
| events lost / out of order (all rounds) | ${sse.lost} / ${!sse.inOrder} | ${websocket.lost} / ${!websocket.inOrder} | |
| rounds (events/s) | ${sse.rounds.join(", ")} | ${websocket.rounds.join(", ")} | |
`);
}

runMain(main);
