import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { waitFor } from "@sandbox-agent/testkit";
import { AgentRequestError, NotConnectedError, type SandboxAgentEvent } from "../src/index.js";
import { messageTexts, record, useServer } from "./helpers.js";

const fixture = useServer();

describe("metadata conversion", () => {
  test("prompt metadata travels in the sandbox namespace of the request", async () => {
    const client = fixture.client();
    const events = record(client);
    const { sessionId } = await client.newSession({ cwd: "/tmp" });
    await client.prompt({ sessionId, prompt: "meta", metadata: { variant: "fast", n: 2 } });
    await client.prompt({ sessionId, prompt: "meta" });
    const [withMeta, without] = messageTexts(events, sessionId);
    assert.deepEqual(JSON.parse(withMeta!), { "sandboxagent.dev": { variant: "fast", n: 2 } });
    assert.equal(without, "null", "no metadata, no _meta");
  });
});

describe("event conversion", () => {
  test("a non-protocol line from the agent becomes a parseError event", async () => {
    const client = fixture.client();
    const events = record(client);
    const { sessionId } = await client.newSession({ cwd: "/tmp" });
    await client.prompt({ sessionId, prompt: "garbage not json at all; echo after" });
    const parseErrors = events.filter((e) => e.type === "parseError");
    assert.equal(parseErrors.length, 1);
    assert.deepEqual(
      { ...parseErrors[0]!, error: "" },
      {
        type: "parseError",
        line: "not json at all",
        truncated: false,
        error: "",
      },
    );
    assert.match((parseErrors[0] as { error: string }).error, /JSON/);
    assert.ok(messageTexts(events, sessionId).includes("after"), "the connection survived");
  });

  test("other notifications are passed on as notification events", async () => {
    const client = fixture.client();
    const events = record(client);
    const { sessionId } = await client.newSession({ cwd: "/tmp" });
    await client.prompt({ sessionId, prompt: `ext _vendor/ping {"sessionId":"${sessionId}","n":1}` });
    const event = events.find((e) => e.type === "notification");
    assert.deepEqual(event, {
      type: "notification",
      method: "_vendor/ping",
      params: { sessionId, n: 1 },
      sessionId,
    });
  });

  test("an agent exit becomes ended (per session) then disconnected; the client can reconnect", async () => {
    const client = fixture.client();
    const events = record(client);
    const first = await client.newSession({ cwd: "/tmp" });
    const second = await client.newSession({ cwd: "/tmp" });
    const iterator = client.events({ types: ["ended", "disconnected"] });
    const error = await client
      .prompt({ sessionId: first.sessionId, prompt: "crash 7" })
      .catch((e: unknown) => e);
    assert.ok(error instanceof AgentRequestError, String(error));
    assert.equal(error.agentExited, true);
    await waitFor(() => events.some((e) => e.type === "ended"), 5000, "ended event");
    assert.equal(client.connected, false, "unusable as soon as the agent is gone");
    await assert.rejects(client.listSessions(), NotConnectedError);
    const seen: SandboxAgentEvent[] = [];
    for await (const event of iterator) seen.push(event);
    const ended = seen.filter((e) => e.type === "ended");
    assert.deepEqual(ended.map((e) => e.sessionId).sort(), [first.sessionId, second.sessionId].sort());
    for (const e of ended) {
      assert.equal(e.reason, "agent_exited");
      assert.equal(e.exitCode, 7);
      assert.equal(e.signal, null);
      assert.equal(typeof e.stderrTail, "string");
    }
    assert.deepEqual(seen.at(-1), { type: "disconnected", reason: "agentExited" });
    await client.connect();
    const again = await client.newSession({ cwd: "/tmp" });
    assert.equal(
      (await client.prompt({ sessionId: again.sessionId, prompt: "echo back" })).stopReason,
      "end_turn",
    );
  });
});
