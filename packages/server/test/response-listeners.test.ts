import assert from "node:assert/strict";
import { Agent, request, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import { tempDir } from "@sandbox-agent/testkit";
import { startServer, type RunningServer } from "../src/server.js";

/** Listeners per event of an emitter, by event name. */
function listenerCounts(emitter: NodeJS.EventEmitter): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const name of emitter.eventNames()) counts[String(name)] = emitter.listenerCount(name);
  return counts;
}

describe("listeners per response (in process)", () => {
  let server: RunningServer;
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const sockets = new Set<Socket>();
  /** `close` listeners of each response, counted when it finished. */
  const closeListeners: number[] = [];
  before(async () => {
    server = await startServer({
      dataDir: tempDir("response-listeners-"),
      port: 0,
      defaultAgent: "mock",
      logLevel: "error",
      eventLog: { inMemory: true },
    });
    server.server.on("connection", (socket: Socket) => sockets.add(socket));
    // After the server's own handler: what it added to the response is there by `finish`.
    server.server.on("request", (_req: IncomingMessage, res: ServerResponse) =>
      res.on("finish", () => closeListeners.push(res.listenerCount("close"))),
    );
  });
  after(async () => {
    agent.destroy();
    await server.close();
  });

  function send(
    method: string,
    target: string,
    body?: string,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; headers: IncomingMessage["headers"]; body: string }> {
    return new Promise((resolve, reject) => {
      const req = request(`${server.url}${target}`, { method, agent, headers }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  it("one close listener per response, and flat listener counts on a keep-alive socket", async () => {
    const json = { "content-type": "application/json" };
    const initialize = await send(
      "POST",
      "/v2/rpc",
      JSON.stringify({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: 1 } }),
      json,
    );
    assert.equal(initialize.status, 200, initialize.body);
    const connection = { ...json, "acp-connection-id": String(initialize.headers["acp-connection-id"]) };
    let id = 1;
    /** One of each kind of answer: a 202, a problem read after the body, a problem before, a JSON 200. */
    const round = async (): Promise<void> => {
      const message = JSON.stringify({ jsonrpc: "2.0", id: id++, method: "x/ping" });
      assert.equal((await send("POST", "/v2/rpc", message, connection)).status, 202);
      assert.equal((await send("POST", "/v2/rpc", message.replace("2.0", "1.0"), connection)).status, 400);
      assert.equal((await send("GET", "/v2/rpc")).status, 406);
      assert.equal((await send("GET", "/v2/health")).status, 200);
    };
    for (let i = 0; i < 5; i++) await round();
    assert.equal(sockets.size, 1, "every request on one keep-alive socket");
    const [socket] = sockets;
    const early = listenerCounts(socket!);
    closeListeners.length = 0;
    for (let i = 0; i < 100; i++) await round();
    assert.deepEqual(listenerCounts(socket!), early, "no listener left behind on the socket");
    assert.equal(sockets.size, 1);
    assert.equal(closeListeners.length, 400);
    assert.deepEqual(new Set(closeListeners), new Set([1]), "one close listener per response");
  });
});
