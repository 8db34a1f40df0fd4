import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { waitFor } from "@sandbox-agent/testkit";
import { messageTexts, record, useServer, healthConnections } from "./helpers.js";

const fixture = useServer();

describe("transport: websocket", () => {
  test("a session turn with a permission round trip over one WebSocket (ws in Node, a ticket for the token)", async () => {
    const asked: string[] = [];
    const client = fixture.client({
      transport: "websocket",
      onPermissionRequest: (request) => {
        asked.push(request.sessionId);
        return { outcome: "selected", optionId: "allow_once" };
      },
    });
    const events = record(client);
    const { sessionId } = await client.newSession({ cwd: "/tmp" });
    const result = await client.prompt({ sessionId, prompt: "chunks 100\npermission go" });
    assert.equal(result.stopReason, "end_turn");
    const texts = messageTexts(events, sessionId);
    assert.deepEqual(
      texts.slice(0, 100),
      Array.from({ length: 100 }, (_, i) => `chunk ${i + 1} `),
    );
    assert.ok(texts.includes("permission: selected allow_once"));
    assert.deepEqual(asked, [sessionId]);
    assert.equal(await healthConnections(fixture), 1);
    // Disconnecting closes the socket on purpose: the server ends the connection.
    await client.disconnect();
    await waitFor(async () => (await healthConnections(fixture)) === 0, 10_000, "the connection to end");
  });
});
