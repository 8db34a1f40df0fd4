import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { waitFor } from "@sandbox-agent/testkit";
import { AgentRequestError } from "../src/index.js";
import { messageTexts, record, useServer } from "./helpers.js";

const fixture = useServer();

describe("sandbox session features", () => {
  test("the connection reports the server's features", async () => {
    const client = fixture.client();
    await client.listSessions();
    const features = client.agentInfo?.features ?? {};
    assert.equal(features.sessionSetMetadata, true, JSON.stringify(features));
    assert.equal(features.sessionListModels, true);
  });

  test("metadata given to newSession comes back from listSessions as fields and metadata", async () => {
    const client = fixture.client();
    const { sessionId } = await client.newSession({
      cwd: "/tmp/meta-parity",
      metadata: { title: "Parity", variant: "v2", skills: ["a", "b"] },
    });
    await client.prompt({ sessionId, prompt: "echo one" });
    const { sessions } = await client.listSessions({ cwd: "/tmp/meta-parity" });
    const listed = sessions.find((s) => s.sessionId === sessionId);
    assert.ok(listed, JSON.stringify(sessions));
    assert.equal(listed.title, "Parity");
    assert.equal(listed.agent, "mock");
    assert.equal(listed.ended, false);
    assert.equal(typeof listed.createdAt, "string");
    assert.ok((listed.eventCount ?? 0) > 0, `eventCount ${listed.eventCount}`);
    assert.equal(listed.metadata.variant, "v2");
    assert.deepEqual(listed.metadata.skills, ["a", "b"]);
    assert.equal(listed.metadata.agent, "mock", "first-class fields are also in metadata");
  });

  test("setMetadata merges, removes null keys and returns the result; title is announced", async () => {
    const client = fixture.client();
    const events = record(client);
    const { sessionId } = await client.newSession({ cwd: "/tmp", metadata: { keep: 1, drop: 2 } });
    const merged = await client.setMetadata({
      sessionId,
      metadata: { title: "Renamed", drop: null, extra: true },
    });
    assert.equal(merged.title, "Renamed");
    assert.equal(merged.keep, 1);
    assert.equal(merged.extra, true);
    assert.equal("drop" in merged, false);
    const titleEvent = await waitFor(
      () =>
        events.find(
          (e) =>
            e.type === "update" &&
            e.update.sessionUpdate === "session_info_update" &&
            e.update.title === "Renamed",
        ),
      3000,
      "title update event",
    );
    assert.equal(
      titleEvent.type === "update" && titleEvent.metadata.origin,
      "set_metadata",
      "update metadata surfaced",
    );
    const { sessions } = await client.listSessions();
    assert.equal(sessions.find((s) => s.sessionId === sessionId)?.title, "Renamed");
    await assert.rejects(client.setMetadata({ sessionId: "unknown", metadata: { a: 1 } }), AgentRequestError);
  });

  test("listModels lists the agent's models; setMetadata model switches it", async () => {
    const client = fixture.client();
    const { sessionId } = await client.newSession({ cwd: "/tmp" });
    const before = await client.listModels({ sessionId });
    assert.deepEqual(before.models.map((m) => m.id).sort(), ["mock-fast", "mock-smart"]);
    assert.equal(before.currentModelId, "mock-fast");
    await client.setMetadata({ sessionId, metadata: { model: "mock-smart" } });
    assert.equal((await client.listModels({ sessionId })).currentModelId, "mock-smart");
  });

  test("detachSession stops that session's events on this connection", async () => {
    const client = fixture.client();
    const events = record(client);
    const { sessionId } = await client.newSession({ cwd: "/tmp" });
    await client.detachSession({ sessionId });
    await client.prompt({ sessionId, prompt: "echo unseen" }).catch(() => undefined);
    assert.deepEqual(messageTexts(events, sessionId), []);
  });

  test("terminateSession ends the session (ended event, reason terminated) and keeps the connection", async () => {
    const client = fixture.client();
    const events = record(client);
    const { sessionId } = await client.newSession({ cwd: "/tmp" });
    const other = await client.newSession({ cwd: "/tmp" });
    await client.terminateSession({ sessionId });
    const ended = await waitFor(
      () => events.find((e) => e.type === "ended" && e.sessionId === sessionId),
      3000,
      "ended event",
    );
    assert.equal(ended.type === "ended" && ended.reason, "terminated");
    assert.equal(client.connected, true);
    assert.equal(
      (await client.prompt({ sessionId: other.sessionId, prompt: "echo alive" })).stopReason,
      "end_turn",
    );
    const { sessions } = await client.listSessions();
    const listed = sessions.find((s) => s.sessionId === sessionId);
    // The mock forgets closed sessions; a listing that keeps them must mark them ended.
    assert.ok(listed === undefined || listed.ended === true, JSON.stringify(listed));
    await assert.rejects(client.prompt({ sessionId, prompt: "echo gone" }), AgentRequestError);
  });
});
