#!/usr/bin/env node
// The floor for `bench/event-log.mjs`: the least a Node process can do to carry an agent's stdout to
// an HTTP reader. `GET /?prompt=TEXT` starts the mock agent, sends it `initialize`, `session/new`
// and one `session/prompt` (TEXT), and writes each stdout line to the response as an SSE event
// (`data: LINE\n\n`), pausing the agent's stdout while the socket is full; the response ends with
// the prompt's answer. No ids, no log, no parsing beyond the line split: what its RSS grows by over
// a turn is Node's own (the stream's buffers, V8's young generation), not the server's.
// Not `node-floor-server.mjs` (the Rust-peer bench's floor, which speaks `/v2/rpc` and copies each
// read into one framed Buffer, the least CPU per event): that framing grows about twice as much over
// the same turn, and writing these views under cork/uncork costs ~2.7x the CPU (bench/README).
import { spawn } from "node:child_process";
import http from "node:http";
import { mockAgentBin } from "@sandbox-agent/testkit";

const server = http.createServer((req, res) => {
  if (req.url === "/v2/health") return res.end("ok");
  const prompt = new URL(req.url, "http://floor").searchParams.get("prompt") ?? "echo hi";
  const agent = spawn(process.execPath, [mockAgentBin], { stdio: ["pipe", "pipe", "ignore"] });
  const send = (message) => agent.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", ...message })}\n`);
  res.writeHead(200, { "content-type": "text/event-stream" });
  send({ id: 0, method: "initialize", params: { protocolVersion: 1 } });
  let rest = Buffer.alloc(0);
  agent.stdout.on("data", (chunk) => {
    const data = rest.length === 0 ? chunk : Buffer.concat([rest, chunk]);
    let start = 0;
    for (let end = data.indexOf(10); end !== -1; start = end + 1, end = data.indexOf(10, start)) {
      const line = data.subarray(start, end);
      // Setup only: a session once initialized, the prompt in it, and the prompt's answer to end on.
      if (line.includes('"id":0,"result"'))
        send({ id: 1, method: "session/new", params: { cwd: "/tmp", mcpServers: [] } });
      if (line.includes('"id":1,"result"')) {
        const sessionId = /"sessionId":"([^"]+)"/.exec(line.toString())[1];
        send({
          id: 2,
          method: "session/prompt",
          params: { sessionId, prompt: [{ type: "text", text: prompt }] },
        });
      }
      res.write("data: ");
      res.write(line);
      if (!res.write("\n\n")) agent.stdout.pause();
      if (line.includes('"id":2,')) {
        res.end();
        agent.kill();
      }
    }
    rest = data.subarray(start);
  });
  res.on("drain", () => agent.stdout.resume());
  res.on("close", () => agent.kill());
});

server.listen(0, "127.0.0.1", () => console.log(`listening on http://127.0.0.1:${server.address().port}`));
process.on("SIGTERM", () => process.exit(0));
