import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { waitFor } from "@sandbox-agent/testkit";
import { AgentRequestError, type PermissionRequest, type SandboxAgentEvent } from "../src/index.js";
import { messageTexts, record, useServer } from "./helpers.js";

const fixture = useServer();

describe("sessions", () => {
  test("prompt streams updates in order before it resolves, then a turnEnded event", async () => {
    const client = fixture.client();
    const events = record(client);
    const { sessionId } = await client.newSession({ cwd: "/tmp" });
    const result = await client.prompt({ sessionId, prompt: "chunks 200" });
    assert.equal(result.stopReason, "end_turn");
    const texts = messageTexts(events, sessionId);
    assert.deepEqual(
      texts,
      Array.from({ length: 200 }, (_, i) => `chunk ${i + 1} `),
    );
    const last = events.at(-1);
    assert.deepEqual(last, { type: "turnEnded", sessionId, stopReason: "end_turn" });
  });

  test("events() iterates one session's events and ends on disconnect", async () => {
    const client = fixture.client();
    const a = await client.newSession({ cwd: "/tmp" });
    const b = await client.newSession({ cwd: "/tmp" });
    const iterator = client.events({
      sessionId: a.sessionId,
      types: ["update", "turnEnded", "disconnected"],
    });
    const typed: string[] = [];
    client.on("turnEnded", (event) => typed.push(`${event.sessionId}:${event.stopReason}`), {
      sessionId: b.sessionId,
    });
    await client.prompt({ sessionId: b.sessionId, prompt: "echo other" });
    await client.prompt({ sessionId: a.sessionId, prompt: "echo mine" });
    await client.disconnect();
    const seen: SandboxAgentEvent[] = [];
    for await (const event of iterator) seen.push(event);
    assert.deepEqual(messageTexts(seen), ["mine"]);
    assert.deepEqual(typed, [`${b.sessionId}:end_turn`], "typed callback with a session filter");
    assert.deepEqual(
      seen.map((e) => e.type),
      ["update", "turnEnded", "disconnected"],
    );
  });

  test("events() ends when its signal aborts", async () => {
    const client = fixture.client();
    const controller = new AbortController();
    const iterator = client.events({ signal: controller.signal });
    const waiting = iterator.next(); // no event is coming: it waits
    controller.abort();
    assert.deepEqual(await waiting, { done: true, value: undefined });
    assert.deepEqual(await iterator.next(), { done: true, value: undefined });
  });

  test("onPermissionRequest decides; the request is also reported as an event", async () => {
    const asked: PermissionRequest[] = [];
    const client = fixture.client({
      onPermissionRequest: (request) => {
        asked.push(request);
        return { outcome: "selected", optionId: "reject_once" };
      },
    });
    const events = record(client);
    const { sessionId } = await client.newSession({ cwd: "/tmp" });
    await client.prompt({ sessionId, prompt: "permission deploy" });
    assert.equal(asked.length, 1);
    assert.equal(asked[0]!.sessionId, sessionId);
    assert.deepEqual(
      asked[0]!.options.map((o) => o.optionId),
      ["allow_once", "allow_always", "reject_once", "reject_always"],
    );
    assert.ok(events.some((e) => e.type === "permission" && e.request.sessionId === sessionId));
    assert.ok(messageTexts(events, sessionId).includes("permission: selected reject_once"));
  });

  test("without a handler permission requests are cancelled", async () => {
    const client = fixture.client();
    const events = record(client);
    const { sessionId } = await client.newSession({ cwd: "/tmp" });
    await client.prompt({ sessionId, prompt: "permission" });
    assert.ok(messageTexts(events, sessionId).includes("permission: cancelled"));
  });

  test("cancel() and an aborted prompt signal end the turn with cancelled", async () => {
    const client = fixture.client();
    const events = record(client);
    const { sessionId } = await client.newSession({ cwd: "/tmp" });
    const started = (text: string) => () => messageTexts(events, sessionId).includes(text);
    const running = client.prompt({ sessionId, prompt: "echo hanging; hang" });
    await waitFor(started("hanging"), 10_000, "the hanging turn");
    await client.cancel({ sessionId });
    assert.equal((await running).stopReason, "cancelled");
    const controller = new AbortController();
    const aborted = client.prompt({
      sessionId,
      prompt: "echo sleeping; sleep 600000",
      signal: controller.signal,
    });
    await waitFor(started("sleeping"), 10_000, "the sleeping turn");
    controller.abort();
    assert.equal((await aborted).stopReason, "cancelled");
  });

  test("a cancelled turn also cancels a pending permission request", async () => {
    let asked = false;
    let signalled = false;
    const client = fixture.client({
      onPermissionRequest: (_request, { signal }) =>
        new Promise((resolve) => {
          asked = true;
          signal.addEventListener("abort", () => {
            signalled = true;
            resolve({ outcome: "selected", optionId: "allow_once" });
          });
        }),
    });
    const events = record(client);
    const { sessionId } = await client.newSession({ cwd: "/tmp" });
    const running = client.prompt({ sessionId, prompt: "permission" });
    await waitFor(() => asked, 10_000, "the permission request");
    await client.cancel({ sessionId });
    assert.equal((await running).stopReason, "cancelled");
    assert.equal(signalled, true, "the handler's signal aborted");
    assert.ok(messageTexts(events, sessionId).includes("permission: cancelled"));
  });

  test("agent errors become AgentRequestError with the code", async () => {
    const client = fixture.client();
    const { sessionId } = await client.newSession({ cwd: "/tmp" });
    const error = await client.prompt({ sessionId, prompt: "error -32042 nope" }).catch((e: unknown) => e);
    assert.ok(error instanceof AgentRequestError, String(error));
    assert.equal(error.code, -32042);
    assert.equal(error.operation, "prompt");
    assert.match(error.message, /nope/);
    const invalid = await client.prompt({ sessionId, prompt: "chunks many" }).catch((e: unknown) => e);
    assert.ok(invalid instanceof AgentRequestError);
    assert.equal(invalid.code, -32602);
  });

  test("content parts are sent as given", async () => {
    const client = fixture.client();
    const events = record(client);
    const { sessionId } = await client.newSession({ cwd: "/tmp" });
    await client.prompt({
      sessionId,
      prompt: [
        { type: "text", text: "blocks" },
        { type: "resource_link", uri: "file:///a", name: "a" },
      ],
    });
    assert.deepEqual(messageTexts(events, sessionId), ["blocks: text, resource_link(file:///a)"]);
  });

  test("modes, config options and model selection", async () => {
    const client = fixture.client();
    const events = record(client);
    const session = await client.newSession({ cwd: "/tmp" });
    const { sessionId } = session;
    assert.equal(session.modes?.currentModeId, "default");
    await client.setSessionMode({ sessionId, modeId: "plan" });
    const modeUpdate = events.find(
      (e) => e.type === "update" && e.update.sessionUpdate === "current_mode_update",
    );
    assert.ok(modeUpdate, "a mode update event arrived");
    const { configOptions } = await client.setSessionConfigOption({
      sessionId,
      configId: "verbosity",
      value: "terse",
    });
    assert.equal(configOptions.find((o) => o.id === "verbosity")?.currentValue, "terse");
    // The mock has no model call; the SDK falls back to its `model` option.
    await client.setSessionModel({ sessionId, modelId: "mock-smart" });
    const after = await client.setSessionConfigOption({ sessionId, configId: "verbosity", value: "normal" });
    assert.equal(after.configOptions.find((o) => o.id === "model")?.currentValue, "mock-smart");
    await assert.rejects(client.setSessionModel({ sessionId: "unknown", modelId: "x" }), AgentRequestError);
  });

  test("listSessions, loadSession (history replayed), resumeSession, forkSession", async () => {
    const client = fixture.client();
    const { sessionId } = await client.newSession({ cwd: "/tmp/load-test" });
    await client.prompt({ sessionId, prompt: "echo remembered" });
    const listed = await client.listSessions({ cwd: "/tmp/load-test" });
    assert.deepEqual(
      listed.sessions.map((s) => s.sessionId),
      [sessionId],
    );
    assert.equal(listed.sessions[0]!.cwd, "/tmp/load-test");
    const fork = await client.forkSession({ sessionId, cwd: "/tmp/load-test" });
    assert.notEqual(fork.sessionId, sessionId);
    const events = record(client);
    await client.loadSession({ sessionId: fork.sessionId, cwd: "/tmp/load-test" });
    assert.ok(messageTexts(events, fork.sessionId).includes("remembered"), "forked history replayed on load");
    const resumed = await client.resumeSession({ sessionId, cwd: "/tmp/load-test" });
    assert.equal(resumed.sessionId, sessionId);
    const missing = await client.loadSession({ sessionId: "missing", cwd: "/tmp" }).catch((e: unknown) => e);
    assert.ok(missing instanceof AgentRequestError);
    assert.equal(missing.code, -32002);
  });
});
