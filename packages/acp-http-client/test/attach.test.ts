import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { PromptResponse, SessionNotification } from "@agentclientprotocol/sdk";
import { waitFor } from "@sandbox-agent/testkit";
import { AcpConnectionLostError, AcpHttpClient, type AcpEnvelope } from "../src/index.js";
import { initParams, startOurServer, text, type TestServer } from "./helpers.js";

const CHUNKS = 60;

/** Texts of the agent message chunks a client receives. */
function chunksOf(client: AcpHttpClient): string[] {
  const chunks: string[] = [];
  client.onNotification("session/update", (n: SessionNotification) => {
    if (n.update.sessionUpdate === "agent_message_chunk" && n.update.content.type === "text")
      chunks.push(n.update.content.text);
  });
  return chunks;
}

describe("attach: a second client continues a connection the first one left", { timeout: 60_000 }, () => {
  let server: TestServer;
  before(async () => {
    server = await startOurServer();
  });
  after(() => server.stop());

  it("takes over mid-turn from the first client's cursor: every event once, its own ids apart", async () => {
    const eventIds: string[] = [];
    const first = new AcpHttpClient({ baseUrl: server.baseUrl, onEventId: (id) => eventIds.push(id) });
    const firstChunks = chunksOf(first);
    const init = await first.initialize(initParams());
    const { sessionId } = await first.newSession({ cwd: "/tmp", mcpServers: [] });
    // The first client's prompt stays in flight (request id 2) while the second one sends its own.
    void first.prompt({ sessionId, prompt: text(`slow ${CHUNKS} 25`) }).catch(() => undefined);
    await waitFor(() => firstChunks.length >= 10, 20_000, "the turn to be under way");
    await first.detach();
    const seen = firstChunks.length;
    const cursor = eventIds.at(-1)!;

    const unmatched: AcpEnvelope[] = [];
    const second = new AcpHttpClient({ baseUrl: server.baseUrl });
    second.onEnvelope((envelope) => envelope.unmatched && unmatched.push(envelope));
    const secondChunks = chunksOf(second);
    await second.attach({
      connectionId: first.connectionId!,
      protocolVersion: init.protocolVersion,
      lastEventId: cursor,
    });
    // Three requests: plain ids 0, 1, 2 would collide with the first client's prompt, still running.
    for (let i = 0; i < 3; i++) await second.listSessions({});
    await waitFor(() => unmatched.length === 1, 20_000, "the first client's prompt to be answered");
    assert.deepEqual(
      [...firstChunks.slice(0, seen), ...secondChunks],
      Array.from({ length: CHUNKS }, (_, i) => `chunk ${i + 1} `),
      "the chunks the first client saw, then the rest, once each",
    );
    const answer = unmatched[0]!.message as { id: unknown; result: PromptResponse };
    assert.equal(answer.id, 2, "the answer to the first client's prompt, by its id");
    assert.equal(answer.result.stopReason, "end_turn");
    assert.match(unmatched[0]!.eventId ?? "", /\.\d+$/);

    const next = await second.prompt({ sessionId, prompt: text("echo from the second client") });
    assert.equal(next.stopReason, "end_turn");
    assert.equal(secondChunks.at(-1), "from the second client");
    await second.close();
  });

  it("fails with connection lost when the server no longer has the connection", async () => {
    const client = new AcpHttpClient({ baseUrl: server.baseUrl, reconnect: { maxAttempts: 1 } });
    await assert.rejects(
      client.attach({ connectionId: "no-such-connection", protocolVersion: 1 }),
      (error: Error) => error instanceof AcpConnectionLostError && /404/.test(error.message),
    );
  });
});
