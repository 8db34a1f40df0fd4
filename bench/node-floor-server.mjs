#!/usr/bin/env node
// The Node floor for bench/rust-peer.mjs: the least a node:http server must do to serve the bench's
// requests over our `/v2/rpc` wire protocol, and nothing else (no router, validation, log, auth,
// replay, recovery). A measuring stick, not a server to use.
//   node bench/node-floor-server.mjs AGENT_COMMAND [ARGS...]
// It does the same I/O as ours per connection: one agent process over stdio, request lines in,
// the agent's stdout lines out as SSE events with ids, paused while the socket is full.
//   POST /v2/rpc `initialize`      spawns the agent, answers 200 with its response + Acp-Connection-Id
//   POST /v2/rpc (connection id)   writes the body as a line to the agent's stdin, answers 202
//   GET  /v2/rpc (connection id)   the SSE stream of the agent's lines (those before it, then live)
//   DELETE /v2/rpc                 stops the agent, 202
//   GET  /v2/health                200
import { spawn } from "node:child_process";
import http from "node:http";

const [command, ...args] = process.argv.slice(2);
const connections = new Map();
let nextId = 1;

/** One agent process and the SSE framing of its stdout. */
class Connection {
  constructor() {
    this.id = String(nextId++);
    // node:crypto would add ~1 MiB and a few ms to start (ours loads it on first use).
    this.epoch = Math.floor(Math.random() * 2 ** 32)
      .toString(16)
      .padStart(8, "0");
    this.seq = 0;
    this.pending = []; // framed events before a reader attached
    this.reader = undefined;
    this.rest = "";
    this.onLine = undefined; // set while waiting for the initialize response
    this.agent = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"], detached: true });
    this.agent.stderr.resume();
    this.agent.stdout.setEncoding("utf8").on("data", (text) => this.output(text));
    this.agent.once("close", () => this.reader?.end());
  }

  /** Frames every whole line of `text` as an event; one socket write per read from the pipe. */
  output(text) {
    const lines = (this.rest + text).split("\n");
    this.rest = lines.pop();
    let framed = "";
    for (const line of lines) {
      if (this.onLine?.(line)) continue;
      framed += `id: ${this.epoch}.${++this.seq}\ndata: ${line}\n\n`;
    }
    if (!framed) return;
    if (!this.reader) return void this.pending.push(framed);
    if (!this.reader.write(framed)) {
      this.agent.stdout.pause();
      this.reader.once("drain", () => this.agent.stdout.resume());
    }
  }

  /** Sends `initialize` and resolves with the agent's response line. */
  initialize(body, id) {
    return new Promise((resolve) => {
      this.onLine = (line) => {
        if (JSON.parse(line).id !== id) return false;
        this.onLine = undefined;
        resolve(line);
        return true;
      };
      this.agent.stdin.write(body + "\n");
    });
  }

  attach(res) {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.write(`id: ${this.epoch}.0\ndata: \n\n`);
    this.reader = res;
    res.once("close", () => this.reader === res && (this.reader = undefined));
    for (const framed of this.pending.splice(0)) res.write(framed);
  }

  close() {
    connections.delete(this.id);
    this.reader?.end();
    try {
      process.kill(-this.agent.pid, "SIGTERM");
    } catch {
      // already gone
    }
  }
}

function readBody(req) {
  return new Promise((resolve) => {
    let body = "";
    req.setEncoding("utf8").on("data", (d) => (body += d));
    req.on("end", () => resolve(body));
  });
}

async function rpc(req, res) {
  const conn = connections.get(req.headers["acp-connection-id"]);
  if (!conn && req.method !== "POST") return void res.writeHead(404).end();
  if (req.method === "GET") return conn.attach(res);
  if (req.method === "DELETE") {
    conn.close();
    return res.writeHead(202).end();
  }
  const body = await readBody(req);
  if (conn) {
    conn.agent.stdin.write(body + "\n");
    return res.writeHead(202).end();
  }
  const created = new Connection();
  connections.set(created.id, created);
  const response = await created.initialize(body, JSON.parse(body).id);
  res.writeHead(200, { "content-type": "application/json", "acp-connection-id": created.id }).end(response);
}

const server = http.createServer((req, res) => {
  if (req.url === "/v2/rpc") return void rpc(req, res);
  res.writeHead(200, { "content-type": "application/json" }).end('{"status":"ok"}');
});
// Stops the agents' process groups as ours does, and exits normally (so `--cpu-prof` can write).
process.once("SIGTERM", () => {
  for (const conn of connections.values()) conn.close();
  process.exit(0);
});
server.listen(0, "127.0.0.1", () =>
  console.log(`sandbox-agent listening on http://127.0.0.1:${server.address().port}`),
);
