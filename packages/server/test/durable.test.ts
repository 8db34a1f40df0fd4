import assert from "node:assert/strict";
import { appendFileSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import { waitFor } from "@sandbox-agent/testkit";
import { filteredMock } from "./support/agents.js";
import {
  answerTo,
  assertChunksInOrder,
  assertConsecutive,
  delivered,
  epochOf,
  openRequests,
  type Restartable,
  seqOf,
  serve,
  setup,
  withRestarts,
} from "./support/durable.js";
import { agentText, openSession, RawConnection, type RpcMessage } from "./support/rpc.js";

/**
 * Runs `turn` and stops the server with `signal` once the client received `received` events, then
 * starts it again: the client resumes from its cursor and the whole log is read back from the start.
 */
async function restartMidTurn(run: Restartable, signal: NodeJS.Signals, turn: string, received: number) {
  const { conn, sse, sessionId } = await openSession(run.server);
  const promptId = await conn.send("session/prompt", { sessionId, prompt: [{ type: "text", text: turn }] });
  await waitFor(() => sse.messages().length >= received, 30_000, `${received} events`);
  await run.kill(signal, sse);
  const before = delivered(sse.events);
  const epoch = epochOf(before[0]!.id);

  const again = conn.on(await run.start());
  // The client resumes from the last event it received: the rest, each exactly once.
  const rest = await again.openSse(sse.lastId());
  // The prompt's answer: received before the stop (the turn had ended), or after the restart.
  const answered = sse.events.find((e) => e.data.startsWith(`{"jsonrpc":"2.0","id":${promptId},`));
  const answer = answered ? (JSON.parse(answered.data) as RpcMessage) : await answerTo(rest, promptId);
  const after = delivered(rest.events);
  assertConsecutive([...before, ...after], epoch, seqOf(before[0]!.id));
  // Read back from the start: every event the client had received, the same ids and bytes, in order.
  const full = await again.openSse(`${epoch}.0`);
  await waitFor(() => delivered(full.events).length >= before.length + after.length, 30_000, "the replay");
  assert.deepEqual(delivered(full.events).slice(0, before.length + after.length), [...before, ...after]);
  return { again, full, sessionId, answer, before, after };
}

describe("durable connections: the event log survives a server restart", () => {
  it("SIGKILL in the middle of a 10,000-update turn: every event received is replayed once, in order, and the rest follows", async () => {
    // The agent pauses halfway, so the kill lands mid-turn however fast the client reads.
    await withRestarts(setup(), async (run) => {
      const turn = "chunks 5000; sleep 600000; chunks 5000";
      const { again, full, sessionId, answer, before, after } = await restartMidTurn(
        run,
        "SIGKILL",
        turn,
        3000,
      );
      const messages = [...before, ...after].map((e) => JSON.parse(e.data) as RpcMessage);
      const chunks = assertChunksInOrder(messages);
      // The turn was cut by the crash: the request in flight gets an error saying so.
      assert.equal(answer.error?.data?.reason, "server_restarted", JSON.stringify(answer));
      assert.match(answer.error.message, /server restarted/);
      // Every chunk the server logged before the kill comes back (in order, from 1, with no gap:
      // assertChunksInOrder), at least those the client had. Lines the agent wrote that the server
      // had not read yet die with the agent (the turn is cut), so how many of the 5,000 made it
      // depends on the machine, not on the server.
      const beforeChunks = assertChunksInOrder(before.map((e) => JSON.parse(e.data) as RpcMessage));
      assert.ok(beforeChunks > 0 && chunks >= beforeChunks && chunks <= 5000, `${beforeChunks} / ${chunks}`);
      // The session is re-attached (`session/load`) when the connection is next used; the history
      // the agent replays while loading is not delivered again.
      const mark = delivered(full.events).length;
      const reply = await again.prompt(full, sessionId, "echo after the restart", 30_000);
      assert.equal(reply.result?.stopReason, "end_turn", JSON.stringify(reply));
      const since = delivered(full.events)
        .slice(mark)
        .map((e) => JSON.parse(e.data) as RpcMessage);
      assert.equal(agentText(since, sessionId), "after the restart");
      const kinds = since
        .filter((m) => m.method === "session/update")
        .map((m) => (m.params!.update as { sessionUpdate: string }).sessionUpdate);
      assert.ok(!kinds.includes("user_message_chunk"), `replayed history delivered: ${kinds.join(", ")}`);
      assert.match(run.server.logs(), /agent started again for a recovered connection/);
    });
  });

  it("SIGTERM: the connection comes back the same, its request in flight answered with an error", async () => {
    await withRestarts(setup(), async (run) => {
      const { answer, before, after } = await restartMidTurn(run, "SIGTERM", "slow 400 5; chunks 600", 100);
      assert.equal(answer.error?.data?.reason, "server_restarted", JSON.stringify(answer));
      assertChunksInOrder([...before, ...after].map((e) => JSON.parse(e.data) as RpcMessage));
    });
  });

  for (const fsync of [false, true])
    it(`a request acknowledged (202) and killed at once, before any output: answered with server_restarted; no index line per request${fsync ? " (fsync)" : ""}`, async () => {
      const s = setup(fsync ? { config: { eventLog: { fsync } } } : {});
      await withRestarts(s, async (run) => {
        const { conn, sse, sessionId } = await openSession(run.server);
        const logDir = path.join(s.dataDir, "event-log");
        // Counters and tail marks are written with the checkpoint, about once a second: not counted.
        const records = () =>
          readFileSync(path.join(logDir, "index.journal"), "utf8")
            .split("\n")
            .filter((line) => line.startsWith('["connections"'));
        const requests = () => readFileSync(path.join(logDir, conn.id, "requests.journal"), "utf8");
        const before = records().length;
        const echoes: unknown[] = [];
        for (let i = 0; i < 20; i++) echoes.push((await conn.prompt(sse, sessionId, `echo ${i}`)).id);
        // Each request is one line in the connection's request journal, never the index; its
        // answer writes nothing there (the log holds it), and the checkpoint compacts the lines.
        assert.equal(records().length, before, records().join("\n"));
        const lines = requests().split("\n").slice(0, -1);
        assert.ok(
          lines.every((l) => l.startsWith("+") || l.startsWith("=")),
          lines.join("\n"),
        );
        const added = lines.filter((l) => l.startsWith("+")).map((l) => Number(l.slice(l.indexOf(" ") + 1)));
        // The lines since the last checkpoint: the prompts' own last.
        const tail = added.slice(-echoes.length);
        assert.deepEqual(tail, echoes.slice(echoes.length - tail.length));
        await waitFor(() => requests() === "", 5000, "the journal compacted to nothing (no request open)");
        // The 202 is sent once the request is recorded, without waiting for an answer: a kill the
        // moment it arrives still leaves it answered after the restart.
        const sessions = [sessionId, await conn.newSession(sse), await conn.newSession(sse)];
        const ids: number[] = [];
        for (const id of sessions)
          ids.push(
            await conn.send("session/prompt", {
              sessionId: id,
              prompt: [{ type: "text", text: "sleep 600000" }],
            }),
          );
        await run.restart("SIGKILL", sse);
        const again = conn.on(run.server);
        const rest = await again.openSse(sse.lastId());
        for (const id of ids) {
          const answer = await answerTo(rest, id);
          assert.equal(answer.error?.data?.reason, "server_restarted", JSON.stringify(answer));
        }
        // Each answered once: the journal let go of them once their errors were written.
        const journal = path.join(logDir, conn.id, "requests.journal");
        await waitFor(() => openRequests(journal).length === 0, 5000, "no request left open");
        const answers = delivered(rest.events).filter((e) =>
          ids.some((id) => e.data.includes(`"id":${id},`)),
        );
        assert.equal(answers.length, ids.length);
        // The connection goes on.
        const echoed = await again.prompt(rest, sessionId, "echo after");
        assert.equal(echoed.result?.stopReason, "end_turn");
      });
    });

  it("a torn tail (a write cut short) is cut off and reported; the log continues after the last whole event", async () => {
    const s = setup();
    await withRestarts(s, async (run) => {
      const { conn, sse, sessionId } = await openSession(run.server);
      await conn.prompt(sse, sessionId, "chunks 500");
      await run.kill("SIGKILL", sse);
      const before = delivered(sse.events);
      const dir = path.join(s.dataDir, "event-log", conn.id);
      const last = readdirSync(dir)
        .filter((n) => n.endsWith(".log"))
        .sort()
        .at(-1)!;
      // Half a frame: its magic and a header promising more bytes than follow.
      appendFileSync(path.join(dir, last), Buffer.from("46524d3101000000ff000000", "hex"));

      await run.start();
      await waitFor(() => /repaired the event log/.test(run.server.logs()), 10_000, "the repair report");
      assert.match(run.server.logs(), /a frame cut short/);
      const again = conn.on(run.server);
      const epoch = epochOf(before[0]!.id);
      const full = await again.openSse(`${epoch}.0`);
      await waitFor(() => delivered(full.events).length >= before.length, 10_000, "the replay");
      assert.deepEqual(delivered(full.events), before);
      await again.prompt(full, sessionId, "echo next", 30_000);
      assertConsecutive(delivered(full.events), epoch, 1);
    });
  });

  it("an agent that cannot load sessions: each session ends with reason server_restarted", async () => {
    // The mock, with loadSession and session resume taken out of its initialize answer.
    const agent = filteredMock(
      `(line) => line.replace('"loadSession":true', '"loadSession":false').replace('"resume":{}', '"resume":null')`,
    );
    const s = setup({ agent });
    await withRestarts(s, async (run) => {
      const conn = await RawConnection.open(run.server);
      assert.equal(
        (conn.initialize.result?.agentCapabilities as { loadSession?: boolean }).loadSession,
        false,
      );
      const sse = await conn.openSse(null);
      const sessionId = await conn.newSession(sse);
      await conn.prompt(sse, sessionId, "echo hello");
      await run.restart("SIGKILL", sse);
      const rest = await conn.on(run.server).openSse(sse.lastId());
      const ended = await rest.waitFor((m) => m.method === "_sandboxagent/session/ended");
      assert.equal(ended.params?.sessionId, sessionId);
      assert.equal(ended.params?.reason, "server_restarted");
      assert.match(String(ended.params?.message), /cannot load sessions/);
    });
  });

  it("a permission request the client had not answered: withdrawn with $/cancel_request (server_restarted) after SIGKILL; a late answer is ignored", async () => {
    const s = setup();
    await withRestarts(s, async (run) => {
      const { conn, sse, sessionId } = await openSession(run.server);
      const promptId = await conn.send("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "permission tool-x" }],
      });
      const ask = await sse.waitFor((m) => m.method === "session/request_permission", 30_000);
      await run.restart("SIGKILL", sse);
      const again = conn.on(run.server);
      const rest = await again.openSse(sse.lastId());
      const withdrawn = await rest.waitFor((m) => m.method === "$/cancel_request", 30_000);
      assert.equal(withdrawn.params?.requestId, ask.id);
      const meta = (withdrawn.params?._meta as Record<string, Record<string, unknown>>)["sandboxagent.dev"]!;
      assert.equal(meta.reason, "server_restarted");
      assert.equal(meta.method, "session/request_permission");
      assert.equal(meta.sessionId, sessionId);
      assert.match(String(meta.message), /server restarted/);
      // The prompt that was waiting on it fails saying so.
      const answer = await rest.waitFor((m) => m.id === promptId, 30_000);
      assert.equal(answer.error?.data?.reason, "server_restarted", JSON.stringify(answer));
      // An answer to the withdrawn request is ignored (the agent that asked is gone), and the
      // connection goes on: the session is re-attached and answers.
      const late = await again.post({
        jsonrpc: "2.0",
        id: ask.id,
        result: { outcome: { outcome: "selected", optionId: "allow_once" } },
      });
      assert.equal(late.status, 202);
      await waitFor(
        () => /dropped response to unknown agent request/.test(run.server.logs()),
        10_000,
        "the log",
      );
      const reply = await again.prompt(rest, sessionId, "echo still here", 30_000);
      assert.equal(reply.result?.stopReason, "end_turn", JSON.stringify(reply));
      // Withdrawn once: a second restart does not withdraw it again.
      await run.restart("SIGTERM", rest);
      const thirdConn = conn.on(run.server);
      const third = await thirdConn.openSse(rest.lastId());
      const last = await thirdConn.prompt(third, sessionId, "echo third run", 30_000);
      assert.equal(last.result?.stopReason, "end_turn", JSON.stringify(last));
      assert.deepEqual(
        third.messages().filter((m) => m.method === "$/cancel_request"),
        [],
        "withdrawn again after a second restart",
      );
    });
  });

  it("session metadata and session/list answer the same after a restart", async () => {
    const s = setup();
    await withRestarts(s, async (run) => {
      const { conn, sse, sessionId } = await openSession(run.server);
      const set = await conn.call(sse, "_sandboxagent/session/set_metadata", {
        sessionId,
        metadata: { title: "kept across restarts", ticket: "T-1" },
      });
      assert.equal(set.error, undefined, JSON.stringify(set));
      await conn.prompt(sse, sessionId, "echo one; echo two");
      // Counters are written with the index's next checkpoint (about once a second), not per event.
      const journal = path.join(s.dataDir, "event-log", "index.journal");
      await waitFor(() => readFileSync(journal, "utf8").includes('"eventCount":2'), 10_000, "the checkpoint");
      await run.restart("SIGKILL", sse);
      const again = conn.on(run.server);
      const rest = await again.openSse(sse.lastId());
      const list = await again.call(rest, "session/list", {}, 30_000);
      const entry = (list.result?.sessions as Array<Record<string, unknown>>).find(
        (e) => e.sessionId === sessionId,
      );
      assert.ok(entry, JSON.stringify(list));
      assert.equal(entry.title, "kept across restarts");
      const meta = (entry._meta as Record<string, Record<string, unknown>>)["sandboxagent.dev"]!;
      assert.equal(meta.ticket, "T-1");
      assert.ok(Number(meta.eventCount) >= 2, JSON.stringify(meta));
    });
  });

  it("a cursor older than retention gets 410, before and after a restart; a recent one resumes", async () => {
    const s = setup({ config: { eventLog: { segmentBytes: 32 * 1024, retentionBytes: 64 * 1024 } } });
    await withRestarts(s, async (run) => {
      const { conn, sse, sessionId } = await openSession(run.server);
      await answerTo(
        sse,
        await conn.send("session/prompt", { sessionId, prompt: [{ type: "text", text: "chunks 5000" }] }),
      );
      const epoch = epochOf(delivered(sse.events)[0]!.id);
      const old = await conn.get({ "last-event-id": `${epoch}.1` });
      assert.equal(old.status, 410, await old.text());
      await run.restart("SIGTERM", sse);
      const again = conn.on(run.server);
      const gone = await again.get({ "last-event-id": `${epoch}.1` });
      assert.equal(gone.status, 410);
      const body = (await gone.json()) as { oldestEventId: string };
      assert.ok(seqOf(body.oldestEventId) > 1, JSON.stringify(body));
      const last = seqOf(sse.lastId()!);
      const recent = await again.openSse(`${epoch}.${last - 10}`);
      await waitFor(() => delivered(recent.events).length >= 10, 10_000, "the recent events");
      assertConsecutive(delivered(recent.events), epoch, last - 9);
    });
  });

  for (const windowBytes of [undefined, 0])
    it(`a reader resuming before the in-memory window (${windowBytes === undefined ? "default, 1 MiB" : "eventLog.windowBytes 0"}) reads the turn back from disk: every event once, in order, the same bytes`, async () => {
      const eventLog = windowBytes === undefined ? {} : { windowBytes };
      const server = await serve(setup({ config: { eventLog } }));
      try {
        const { conn, sse, sessionId } = await openSession(server);
        // ~1.7 MB in 3,000 events: past the default window's bytes, within its 10,000 events.
        const turn = `chunks 3000 ${"x".repeat(500)}`;
        await answerTo(
          sse,
          await conn.send("session/prompt", { sessionId, prompt: [{ type: "text", text: turn }] }),
        );
        const live = delivered(sse.events);
        const bytes = live.reduce((sum, e) => sum + e.data.length, 0);
        assert.ok(bytes > 1.5 * 2 ** 20, `${bytes} bytes`);
        // From the turn's first event (on disk), and from 100 events before its end (in memory).
        for (const at of [0, live.length - 100]) {
          const replay = await conn.openSse(live[at]!.id);
          const expected = live.slice(at + 1);
          await waitFor(() => delivered(replay.events).length >= expected.length, 30_000, "the replay");
          assert.deepEqual(delivered(replay.events), expected);
          replay.close();
        }
      } finally {
        await server.stop();
      }
    });

  it("one server per data directory: a second one is refused with a message saying what to do", async () => {
    const s = setup();
    const server = await serve(s);
    try {
      await assert.rejects(
        serve(s),
        /Another sandbox-agent server \(pid \d+\) uses the event log.*--in-memory/s,
      );
    } finally {
      await server.stop();
    }
  });
});
