import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startServer, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { eventsProduced, metric } from "./support/metrics.js";
import { agentText, openSession, RawConnection, type RpcMessage } from "./support/rpc.js";

const updates = (messages: RpcMessage[]) => messages.filter((m) => m.method === "session/update");

describe("GET / SSE, replay and ordering", () => {
  let server: RunningServer;

  before(async () => {
    // In memory, the replay log is the window of `replayEvents` (on disk, retention decides: durable.test.ts).
    server = await startServer({
      args: ["--in-memory"],
      config: { limits: { keepAliveMs: 300, replayEvents: 50, retryMs: 250 } },
    });
  });
  after(() => server.stop());

  it("content negotiation and connection checks", async () => {
    const conn = await RawConnection.open(server);
    const ok = await conn.get();
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get("content-type"), "text/event-stream");
    assert.match(ok.headers.get("cache-control")!, /no-cache/);
    await ok.body!.cancel();
    assert.equal((await conn.get({ accept: "application/json" })).status, 406);
    const none = await fetch(`${server.baseUrl}/v2/rpc`, { headers: { accept: "text/event-stream" } });
    assert.equal(none.status, 400);
    const unknown = await fetch(`${server.baseUrl}/v2/rpc`, {
      headers: { accept: "text/event-stream", "acp-connection-id": "nope" },
    });
    assert.equal(unknown.status, 404);
  });

  it("a response produced before any GET is queued and delivered first", async () => {
    const conn = await RawConnection.open(server);
    const produced = await eventsProduced(server);
    const id = await conn.send("session/new", { cwd: "/", mcpServers: [] });
    await waitFor(async () => (await eventsProduced(server)) > produced, 10_000, "the response produced");
    const sse = await conn.openSse();
    const first = await sse.waitFor(() => true);
    assert.equal(first.id, id);
    assert.ok(first.result?.sessionId);
    sse.close();
  });

  it("a second GET without Last-Event-ID is 409 and the first is unaffected", async () => {
    const conn = await RawConnection.open(server);
    const sse = await conn.openSse();
    const second = await conn.get();
    assert.equal(second.status, 409);
    const sessionId = await conn.newSession(sse);
    assert.ok(sessionId);
    sse.close();
  });

  it("priming event first (id, retry, empty data), keep-alive comments when idle", async () => {
    const conn = await RawConnection.open(server);
    const sse = await conn.openSse();
    await waitFor(() => sse.events.some((e) => e.event === "comment"), 10_000, "a keep-alive comment");
    assert.equal(sse.events[0]!.event, "retry");
    assert.equal(sse.events[1]!.data, "");
    assert.match(sse.events[1]!.id!, /^[0-9a-f]{8}\.0$/);
    assert.ok(
      sse.events.some((e) => e.event === "comment"),
      "keep-alive comment seen",
    );
    assert.equal(sse.messages().length, 0);
    sse.close();
  });

  it("1,000 updates in stdout order, each one object with an id, before the response", async () => {
    const { conn, sse, sessionId } = await openSession(server);
    const response = await conn.prompt(sse, sessionId, "chunks 1000");
    assert.equal(response.result?.stopReason, "end_turn");
    const messageEvents = sse.events.filter(
      (e) => e.event !== "comment" && e.event !== "retry" && e.data !== "",
    );
    assert.ok(messageEvents.every((e) => e.id && !e.data.startsWith("[")));
    const texts = updates(sse.messages()).map(
      (m) => (m.params!.update as { content: { text: string } }).content.text,
    );
    assert.deepEqual(
      texts,
      Array.from({ length: 1000 }, (_, i) => `chunk ${i + 1} `),
    );
    const all = sse.messages();
    const responseIndex = all.findIndex((m) => m.id === response.id);
    assert.ok(all.slice(responseIndex + 1).every((m) => m.method !== "session/update"));
    const seqs = messageEvents.map((e) => Number(e.id!.split(".")[1]));
    assert.deepEqual(
      seqs,
      [...seqs].sort((a, b) => a - b),
    );
    assert.equal(new Set(seqs).size, seqs.length);
    // Consecutive, across batches and digit counts (ids are framed from bytes, `transport/sse.ts`).
    assert.deepEqual(
      seqs,
      seqs.map((_, i) => seqs[0]! + i),
    );
    sse.close();
  });

  it("ids stay consecutive over many small batches and digit counts, and a replay starts at its cursor", async () => {
    // One `echo` turn at a time: batches of one or two events, the stream's event fields kept from
    // one batch to the next (`transport/sse.ts`), through seqs 9 → 10 and 99 → 100.
    const { conn, sse: first, sessionId } = await openSession(server);
    const seqOf = (id: string) => Number(id.split(".")[1]);
    const dataEvents = (reader: typeof first) => reader.events.filter((e) => e.data !== "" && e.id);
    for (let turn = 0; turn < 60; turn++) await conn.prompt(first, sessionId, "echo ping");
    const events = dataEvents(first);
    assert.ok(events.length > 110);
    const seqs = events.map((e) => seqOf(e.id!));
    assert.deepEqual(
      seqs,
      seqs.map((_, i) => seqs[0]! + i),
    );
    assert.equal(new Set(events.map((e) => e.id!.split(".")[0])).size, 1);
    // A new stream's first batch starts after the cursor, at a seq with one digit more.
    const cursor = events.find((e) => seqOf(e.id!) === 99)!.id!;
    const second = await conn.openSse(cursor);
    await first.done;
    await conn.prompt(second, sessionId, "echo pong");
    const replayed = dataEvents(second);
    assert.equal(seqOf(replayed[0]!.id!), 100);
    assert.deepEqual(
      replayed.map((e) => seqOf(e.id!)),
      replayed.map((_, i) => 100 + i),
    );
    // The events the first stream got after the cursor, the same ids and bytes.
    const after = events.filter((e) => seqOf(e.id!) >= 100);
    assert.deepEqual(
      replayed.slice(0, after.length).map((e) => [e.id, e.data]),
      after.map((e) => [e.id, e.data]),
    );
    second.close();
  });

  it("a reconnect with Last-Event-ID takes over and replays after the cursor", async () => {
    const { conn, sse: first, sessionId } = await openSession(server);
    await conn.prompt(first, sessionId, "chunks 5");
    const ids = first.events.filter((e) => e.data !== "" && e.id).map((e) => e.id!);
    const cursor = ids[2]!; // after the session/new response and two updates
    const second = await conn.openSse(cursor);
    await first.done; // the old stream was closed by the server
    const replayed = await second.waitFor((m) => m.result?.stopReason !== undefined);
    assert.ok(replayed);
    const replayedIds = second.events.filter((e) => e.data !== "" && e.id).map((e) => e.id!);
    assert.deepEqual(replayedIds, ids.slice(3));
    second.close();
  });

  it("events produced while detached, including a permission request, are replayed", async () => {
    const { conn, sse, sessionId } = await openSession(server);
    const cursor = sse.lastId()!;
    sse.close();
    const produced = await eventsProduced(server);
    const promptId = await conn.send("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "chunks 10\npermission deploy" }],
    });
    // 10 chunks, the tool call and the permission request, produced while detached.
    await waitFor(
      async () => (await eventsProduced(server)) >= produced + 12,
      10_000,
      "events while detached",
    );
    const again = await conn.openSse(cursor);
    const request = await again.waitFor((m) => m.method === "session/request_permission");
    assert.equal(updates(again.messages()).length, 10 + 1, "10 chunks and the tool call");
    await conn.post({
      jsonrpc: "2.0",
      id: request.id,
      result: { outcome: { outcome: "selected", optionId: "allow_once" } },
    });
    const done = await again.waitFor((m) => m.id === promptId);
    assert.equal(done.result?.stopReason, "end_turn");
    assert.match(agentText(again.messages(), sessionId), /permission: selected allow_once/);
    again.close();
  });

  it("reconnecting without a cursor gets only never-written events, no duplicates", async () => {
    const { conn, sse, sessionId } = await openSession(server);
    sse.close();
    // The server must have seen the reader go, or it would count the next events as written.
    await waitFor(async () => (await metric(server, "sandbox_agent_sse_readers")) === 0, 10_000, "detached");
    const produced = await eventsProduced(server);
    const promptId = await conn.send("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "chunks 3" }],
    });
    await waitFor(async () => (await eventsProduced(server)) >= produced + 4, 10_000, "the turn, detached");
    const again = await conn.openSse(null);
    await again.waitFor((m) => m.id === promptId);
    assert.equal(
      again.messages().filter((m) => m.result?.sessionId).length,
      0,
      "session/new response not repeated",
    );
    assert.equal(updates(again.messages()).length, 3);
    again.close();
  });

  it("an evicted cursor is 410 with no partial stream", async () => {
    const { conn, sse, sessionId } = await openSession(server);
    const early = sse.lastId()!;
    await conn.prompt(sse, sessionId, "chunks 200"); // replay log keeps 50 events
    const response = await conn.get({ "last-event-id": early });
    assert.equal(response.status, 410);
    assert.equal(response.headers.get("content-type"), "application/problem+json");
    sse.close();
  });

  it("a cursor of another connection is 410; a malformed one 400", async () => {
    const a = await RawConnection.open(server);
    const b = await RawConnection.open(server);
    const sseA = await a.openSse();
    await a.newSession(sseA);
    const foreign = await b.get({ "last-event-id": sseA.lastId()! });
    assert.equal(foreign.status, 410);
    const malformed = await b.get({ "last-event-id": "garbage" });
    assert.equal(malformed.status, 400);
    sseA.close();
  });

  it("a session-scoped GET (Acp-Session-Id) is 200 and idle", async () => {
    const { conn, sse, sessionId } = await openSession(server);
    const sessionStream = await conn.get({ "acp-session-id": sessionId });
    assert.equal(sessionStream.status, 200);
    await conn.prompt(sse, sessionId, "echo hi");
    await sessionStream.body!.cancel();
    sse.close();
  });

  it("session/load replays history before its response", async () => {
    const { conn, sse, sessionId } = await openSession(server);
    for (let i = 0; i < 5; i++) await conn.prompt(sse, sessionId, `echo turn ${i}`);
    const before = sse.messages().length;
    const loaded = await conn.call(sse, "session/load", { sessionId, cwd: process.cwd(), mcpServers: [] });
    const replay = sse.messages().slice(before);
    const loadIndex = replay.findIndex((m) => m.id === loaded.id);
    assert.ok(updates(replay.slice(0, loadIndex)).length >= 10, "user + agent chunks replayed first");
    assert.match(agentText(replay.slice(0, loadIndex)), /turn 4/);
    sse.close();
  });
});
