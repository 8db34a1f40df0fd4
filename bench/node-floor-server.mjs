#!/usr/bin/env node
// The Node floor for bench/rust-peer.mjs: the least a node:http server must do to serve the bench's
// requests over our `/v2/rpc` wire protocol, and nothing else (no router, validation, log, auth,
// replay, recovery). A measuring stick, not a server to use.
//   node bench/node-floor-server.mjs AGENT_COMMAND [ARGS...]
// It does the same I/O as ours per connection: one agent process over stdio, request lines in,
// the agent's stdout lines out as SSE events with ids, paused while the socket is full. The lines
// are never decoded: each read from the pipe becomes one Buffer (the ids and `data: ` copied in
// around the line bytes) and one socket write, the least CPU per event Node offers here.
//   POST /v2/rpc `initialize`      spawns the agent, answers 200 with its response + Acp-Connection-Id
//   POST /v2/rpc (connection id)   writes the body as a line to the agent's stdin, answers 202
//   GET  /v2/rpc (connection id)   the SSE stream of the agent's lines (those before it, then live)
//   DELETE /v2/rpc                 stops the agent, 202
//   GET  /v2/health                200
// Not the event-log bench's floor (`floor-server.mjs`, which writes views of the pipe's chunks and
// copies nothing): this one's copy per read is the fastest framing but the least frugal, +47 MB of
// RSS over a 200 MB turn against the byte pipe's +21 (bench/README).
import { spawn } from "node:child_process";
import http from "node:http";

const [command, ...args] = process.argv.slice(2);
const connections = new Map();
let nextId = 1;
const NEWLINE = 10;
const EMPTY = Buffer.alloc(0);

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
    this.rest = EMPTY;
    this.onLine = undefined; // set while waiting for the initialize response
    this.agent = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"], detached: true });
    this.agent.stderr.resume();
    this.agent.stdout.on("data", (chunk) => this.output(chunk));
    this.agent.once("close", () => this.reader?.end());
  }

  /** Frames every whole line of `chunk` (bytes) as an event: one Buffer, one socket write per read. */
  output(chunk) {
    const data = this.rest.length === 0 ? chunk : Buffer.concat([this.rest, chunk]);
    const heads = [];
    const starts = [];
    const ends = [];
    let size = 0;
    let start = 0;
    for (let end = data.indexOf(NEWLINE); end !== -1; start = end + 1, end = data.indexOf(NEWLINE, start)) {
      if (this.onLine?.(data.toString("utf8", start, end))) continue;
      const head = `id: ${this.epoch}.${++this.seq}\ndata: `;
      heads.push(head);
      starts.push(start);
      ends.push(end);
      size += head.length + end - start + 2;
    }
    this.rest = start === data.length ? EMPTY : data.subarray(start);
    if (size === 0) return;
    const framed = Buffer.allocUnsafe(size);
    let at = 0;
    for (let i = 0; i < heads.length; i++) {
      at += framed.latin1Write(heads[i], at);
      at += data.copy(framed, at, starts[i], ends[i]);
      framed[at++] = NEWLINE;
      framed[at++] = NEWLINE;
    }
    if (!this.reader) return void this.pending.push(framed);
    if (!this.reader.write(framed)) {
      this.agent.stdout.pause();
      this.reader.once("drain", () => this.agent.stdout.resume());
    }
  }

  /** Writes the request `line` to the agent and resolves with its response line (initialize only). */
  call(line, id) {
    return new Promise((resolve) => {
      this.onLine = (out) => {
        if (JSON.parse(out).id !== id) return false;
        this.onLine = undefined;
        resolve(out);
        return true;
      };
      this.send(line);
    });
  }

  send(line) {
    this.agent.stdin.write(line + "\n");
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
    conn.send(body);
    return res.writeHead(202).end();
  }
  const created = new Connection();
  connections.set(created.id, created);
  const response = await created.call(body, JSON.parse(body).id);
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
