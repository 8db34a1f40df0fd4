import assert from "node:assert/strict";
import net from "node:net";
import { describe, test } from "node:test";
import { mockAgentBin, startServer, tempDir, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { AgentRequestError, SandboxAgentClient } from "../src/index.js";
import { messageTexts, record, TOKEN } from "./helpers.js";

/** A loopback port free right now, so that a restarted server listens where the client knows it. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
    probe.once("error", reject);
  });
}

const cases: Array<{ transport: "http" | "websocket"; signal: NodeJS.Signals }> = [
  { transport: "http", signal: "SIGKILL" },
  { transport: "websocket", signal: "SIGKILL" },
  // A graceful shutdown closes sockets with 1012 (service restart), which the client resumes.
  { transport: "websocket", signal: "SIGTERM" },
];

describe("a server restart under a client", () => {
  for (const { transport, signal } of cases)
    test(`${transport}, ${signal} mid-turn: the client reconnects to the same connection, its events continue with no gap or duplicate, the prompt in flight fails clearly, the session goes on`, async () => {
      const dataDir = tempDir("sdk-restart-data-");
      const stateDir = tempDir("sdk-restart-mock-");
      const port = await freePort();
      const serve = () =>
        startServer({
          token: TOKEN,
          args: ["--data-dir", dataDir, "--port", String(port)],
          config: {
            agents: {
              mock: {
                command: process.execPath,
                args: [mockAgentBin],
                env: { MOCK_AGENT_STATE_DIR: stateDir },
              },
            },
          },
        });
      let server: RunningServer = await serve();
      const client = new SandboxAgentClient({
        baseUrl: server.baseUrl,
        token: TOKEN,
        agent: "mock",
        requestTimeoutMs: 60_000,
        transport,
        onEnvelope: (e) => e.direction === "inbound" && e.eventId !== undefined && eventIds.push(e.eventId),
      });
      const eventIds: string[] = [];
      try {
        const events = record(client);
        const { sessionId } = await client.newSession({ cwd: "/tmp" });
        const turn = client.prompt({ sessionId, prompt: "slow 2000 5" });
        turn.catch(() => undefined); // observed below
        await waitFor(() => messageTexts(events, sessionId).length >= 50, 30_000, "50 chunks");
        const connectionId = client.connectionId;
        assert.ok(connectionId);
        const exited = new Promise((resolve) => server.process.once("exit", resolve));
        server.process.kill(signal);
        await exited;
        // The kernel closed the server's sockets before it reported the exit; one turn of the event
        // loop lets the client read that, so the prompt below is written after the drop was seen.
        // (A request written in the instant the server dies is covered by acp-http-client's
        // websocket-acks test.)
        await new Promise((resolve) => setImmediate(resolve));
        // Sent while nothing listens: the POST is refused, and sent again once the server is back.
        const next = client.prompt({ sessionId, prompt: "echo after the restart" });
        server = await serve();

        // The prompt in flight is answered by the restarted server: an error that says what happened.
        const error = await turn.then(
          () => assert.fail("the prompt cut by the restart resolved"),
          (e: unknown) => e,
        );
        assert.ok(error instanceof AgentRequestError, String(error));
        assert.match(error.message, /server restarted/);
        assert.equal((error.data as { reason?: string }).reason, "server_restarted");
        assert.equal(error.serverRestarted, true);
        // It was in flight: it may have run, so the SDK does not call it safe to send again.
        assert.equal(error.safeToRetry, false);
        assert.match(error.message, /^prompt failed: .*Send it again if it is safe to repeat/);
        // The same connection goes on: the session is loaded again by a new agent process.
        assert.equal((await next).stopReason, "end_turn");
        // Every chunk the server had logged, once and in order (no gap, no duplicate across the
        // restart), then the new turn's answer and nothing the agent replayed while loading.
        const texts = messageTexts(events, sessionId);
        assert.equal(texts.at(-1), "after the restart");
        texts.slice(0, -1).forEach((text, i) => assert.equal(text, `chunk ${i + 1} `));
        assert.ok(texts.length > 50);
        assert.ok(!events.some((e) => e.type === "disconnected"), "the client saw a disconnect");
        assert.equal(client.connectionId, connectionId, "the same connection after the restart");
        // Every event the client counted, once, in one run of consecutive numbers across the restart.
        assert.equal(new Set(eventIds).size, eventIds.length, "no event id twice");
        const seqs = eventIds.map((id) => Number(id.split(".")[1]));
        seqs.forEach((seq, i) =>
          assert.equal(seq, seqs[0]! + i, `event ${i} of ${seqs.length}: ${eventIds[i]}`),
        );
      } finally {
        await client.dispose().catch(() => undefined);
        await server.stop();
      }
    });
});
