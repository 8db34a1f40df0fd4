import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startServer, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { readSse } from "@sandbox-agent/testkit";
import { mockWith, stdinLog } from "./support/agents.js";
import { processesWith, rssBytes } from "./support/procs.js";
import { openSession, RawConnection } from "./support/rpc.js";

const noisyLog = stdinLog();

describe("backpressure", () => {
  let server: RunningServer;

  before(async () => {
    server = await startServer({
      config: {
        agents: { noisy: mockWith("--stdin-log", noisyLog) },
        limits: {
          maxBufferedBytes: 512 * 1024,
          replayBytes: 512 * 1024,
          stallMs: 1500,
          maxMessageBytes: 1024 * 1024,
        },
      },
    });
  });
  after(() => server.stop());

  it("a client that never reads while the agent floods is closed after the stall; memory stays bounded", async () => {
    const conn = await RawConnection.open(server, "noisy");
    const sse = await conn.openSse();
    const sessionId = await conn.newSession(sse);
    sse.close();
    const base = rssBytes(server.process.pid!);
    const promptId = await conn.send("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: `chunks 400000 ${"x".repeat(200)}` }],
    });
    await waitFor(() => processesWith(noisyLog).length === 0, 15_000, "stalled connection to be closed");
    const grown = rssBytes(server.process.pid!) - base;
    assert.ok(grown < 64 * 1024 * 1024, `server grew by ${grown} bytes for ~100 MB of agent output`);
    // The id is not forgotten: it answers 410 with the reason, and the stream still holds the
    // prompt's error, after everything the agent wrote before the stall.
    const later = await conn.post({ jsonrpc: "2.0", method: "_x" });
    assert.equal(later.status, 410);
    assert.equal(((await later.json()) as { reason: string }).reason, "output_stalled");
    const resumed = await conn.openSse();
    const error = await resumed.waitFor((m) => m.id === promptId, 20_000);
    assert.equal(error.error?.code, -32603);
    assert.equal(error.error?.data?.reason, "output_stalled");
    await resumed.done;
  });

  it("a slow reader gets every event in order while the server stays bounded", async () => {
    const { conn, sse: first, sessionId } = await openSession(server);
    first.close();
    const count = 30_000;
    const pad = "y".repeat(300);
    const promptId = await conn.send("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: `chunks ${count} ${pad}` }],
    });
    const response = await conn.get({ "last-event-id": first.lastId()! });
    const base = rssBytes(server.process.pid!);
    let maxGrowth = 0;
    let seen = 0;
    let lastSeq = 0;
    let done = false;
    for await (const event of readSse(response.body!)) {
      if (!event.data || event.event === "retry" || event.event === "comment") continue;
      const seq = Number(event.id!.split(".")[1]);
      assert.ok(seq > lastSeq, "ids increase");
      lastSeq = seq;
      const message = JSON.parse(event.data) as { id?: number; method?: string };
      if (message.method === "session/update") seen++;
      if (message.id === promptId) {
        done = true;
        break;
      }
      if (seen % 2000 === 0) {
        maxGrowth = Math.max(maxGrowth, rssBytes(server.process.pid!) - base);
        await new Promise((r) => setTimeout(r, 30)); // read slowly so the pipe fills up
      }
    }
    assert.ok(done, "turn completed");
    assert.equal(seen, count, "nothing lost");
    assert.ok(maxGrowth < 48 * 1024 * 1024, `server grew by ${maxGrowth} bytes for ~10 MB streamed`);
  });

  it("a line over the message limit closes the connection with a logged reason, not an OOM", async () => {
    const { conn, sse, sessionId } = await openSession(server);
    const promptId = await conn.send("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "bigline 4000000" }],
    });
    await sse.done;
    await waitFor(() => /message limit/.test(server.logs()), 5000, "log line");
    assert.equal((await fetch(`${server.baseUrl}/v2/health`)).status, 200);
    // The pending prompt got an error saying why, on the stream before it ended; the id then answers 410.
    const messages = sse.messages();
    const error = messages.find((m) => m.id === promptId);
    assert.equal(error?.error?.data?.reason, "message_too_large", JSON.stringify(messages.slice(-3)));
    assert.equal(error?.error?.data?.maxMessageBytes, 1024 * 1024);
    const ended = messages.find((m) => m.method === "_sandboxagent/session/ended");
    assert.equal(ended?.params?.reason, "message_too_large");
    const later = await conn.post({ jsonrpc: "2.0", id: 99, method: "session/prompt", params: {} });
    assert.equal(later.status, 410);
    const problem = (await later.json()) as { reason: string; detail: string };
    assert.equal(problem.reason, "message_too_large");
    assert.match(problem.detail, /maxMessageBytes/);
  });
});
