import assert from "node:assert/strict";
import { connect as connectH2, type ClientHttp2Session } from "node:http2";
import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import { h2cServer, type H2cServer } from "../src/http/h2c.js";
import { createHttpListener, type RequestHandler } from "../src/http/listener.js";

/** How a client stream ended: its status and body, or the reset code of a stream never answered. */
type Outcome = { status: number; body: string; rstCode: number } | { refused: true };

function send(session: ClientHttp2Session, path: string): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ":method": "POST", ":path": path });
    let status = 0;
    let body = "";
    stream.setEncoding("utf8");
    stream.on("response", (headers) => (status = Number(headers[":status"])));
    stream.on("data", (chunk: string) => (body += chunk));
    stream.on("end", () => resolve({ status, body, rstCode: stream.rstCode ?? 0 }));
    stream.on("error", (error: Error) =>
      /REFUSED_STREAM/.test(error.message) ? resolve({ refused: true }) : reject(error),
    );
    stream.end("{}");
  });
}

/** An h2c server on a loopback port whose requests `handler` answers (the listener hands it sockets). */
async function listen(
  handler: (h2: H2cServer) => RequestHandler,
): Promise<{ h2: H2cServer; tcp: Server; url: string }> {
  const h2: H2cServer = h2cServer((req, res) => handler(h2)(req, res), {
    requestTimeoutMs: 10_000,
    maxStreams: 100,
    idleMs: () => 60_000,
  });
  const tcp = createServer((socket) => h2.accept(socket));
  await new Promise<void>((resolve) => tcp.listen(0, "127.0.0.1", resolve));
  return { h2, tcp, url: `http://127.0.0.1:${(tcp.address() as AddressInfo).port}` };
}

describe("h2c sessions at shutdown", () => {
  let servers: Server[] = [];
  before(() => (servers = []));
  after(() => servers.forEach((tcp) => tcp.close()));

  it("a stream being answered as the sessions close gets its whole answer; one not yet taken is refused, not cancelled", async () => {
    // The request that starts the shutdown is answered a turn later, as a 503 of a draining server is.
    let first = true;
    const { tcp, url } = await listen((h2) => (_req, res) => {
      if (first) h2.closeAll(10_000);
      first = false;
      setImmediate(() => res.writeHead(503).end("shutting down"));
    });
    servers.push(tcp);
    const session = connectH2(url);
    session.on("error", () => undefined);
    const closed = new Promise((resolve) => session.once("close", resolve));
    // Both in one write: the second reaches the server behind the first, after or before its GOAWAY.
    const outcomes = await Promise.all([send(session, "/a"), send(session, "/b")]);
    assert.deepEqual(outcomes[0], { status: 503, body: "shutting down", rstCode: 0 });
    const second = outcomes[1];
    assert.ok("refused" in second || (second.status === 503 && second.rstCode === 0), JSON.stringify(second));
    // With nothing open the session ends by itself, long before the grace.
    await closed;
  });

  it("a socket still waiting for node:http2 as the server shuts down is closed with a GOAWAY, not cut", async () => {
    const listener = createHttpListener((_req, res) => res.writeHead(503).end("shutting down"), {
      maxSockets: 10,
      maxStreamsPerSocket: 10,
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 10_000,
      keepAliveTimeoutMs: 10_000,
    });
    const tcp = listener.server;
    servers.push(tcp);
    // The listener's own `data` listener comes first: it has just classified the socket as h2c,
    // which now waits at least a turn for node:http2 (loaded with a listener's first h2c socket).
    tcp.on("connection", (socket: Socket) => socket.once("data", () => listener.closeAllConnections(10_000)));
    await new Promise<void>((resolve) => tcp.listen(0, "127.0.0.1", resolve));
    const session = connectH2(`http://127.0.0.1:${(tcp.address() as AddressInfo).port}`);
    session.on("error", () => undefined);
    const closed = new Promise((resolve) => session.once("close", resolve));
    const outcome = await send(session, "/a");
    assert.ok(
      "refused" in outcome || (outcome.status === 503 && outcome.body === "shutting down"),
      JSON.stringify(outcome),
    );
    await closed;
  });

  it("a session whose stream stays open is destroyed once the grace is over, not before", async () => {
    const graceMs = 300;
    let closedAt = 0;
    const { tcp, url } = await listen((h2) => (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(": open\n\n");
      closedAt = performance.now();
      h2.closeAll(graceMs);
    });
    servers.push(tcp);
    const session = connectH2(url);
    session.on("error", () => undefined);
    const closed = new Promise((resolve) => session.once("close", resolve));
    const stream = session.request({ ":method": "GET", ":path": "/sse" });
    stream.on("error", () => undefined);
    await new Promise((resolve) => stream.once("data", resolve));
    await closed;
    const elapsed = performance.now() - closedAt;
    assert.ok(
      elapsed >= graceMs - 20,
      `destroyed after ${elapsed.toFixed(0)} ms, before the ${graceMs} ms grace`,
    );
  });
});
