import assert from "node:assert/strict";
import {
  closeSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import {
  mountNamespaceMissing,
  needService,
  smallDiskWrapper,
  waitFor,
  type RunningServer,
} from "@sandbox-agent/testkit";
import {
  answerTo,
  assertChunksInOrder,
  assertConsecutive,
  delivered,
  epochOf,
  openRequests,
  seqOf,
  serve,
  setup,
  withRestarts,
} from "./support/durable.js";
import { openSession, type RpcMessage, type SseReader } from "./support/rpc.js";

/** The segment files of a connection's log, oldest first. */
function segments(dataDir: string, connectionId: string): string[] {
  const dir = path.join(dataDir, "event-log", connectionId);
  return readdirSync(dir)
    .filter((n) => n.endsWith(".log"))
    .sort()
    .map((n) => path.join(dir, n));
}

/** Waits for `sse` to end (the server ends a stream at damage it cannot read), failing with the server's log. */
async function ended(sse: SseReader, server: RunningServer): Promise<void> {
  let done = false;
  void sse.done.then(() => (done = true));
  await waitFor(() => done, 20_000, "the end of the stream").catch((error: Error) => {
    throw new Error(`${error.message}; got ${delivered(sse.events).length} events\n${server.logs()}`);
  });
}

/**
 * Runs `test` against a server whose event log is on a 1 MiB tmpfs only the server (in its own
 * mount namespace) sees; the test reaches it at `inside` (through /proc/<pid>/root).
 */
async function withSmallDisk(test: (server: RunningServer, inside: string) => Promise<void>): Promise<void> {
  const s = setup();
  const logDir = path.join(s.dataDir, "event-log");
  mkdirSync(logDir, { recursive: true });
  s.wrapper = smallDiskWrapper(logDir, "1m");
  const server = await serve(s);
  try {
    const inside = path.join(`/proc/${server.process.pid}/root`, logDir);
    assert.equal(statSync(inside).isDirectory(), true);
    await test(server, inside);
  } finally {
    await server.stop();
  }
}

const firstSeqOf = (file: string) => Number(path.basename(file).slice(0, 16));

describe("durable connections: damage to the event log", () => {
  it("a corrupt frame in the middle of a segment: reported, the events up to it replayed, then 410; other connections unharmed", async () => {
    const s = setup({ config: { eventLog: { segmentBytes: 32 * 1024 } } });
    await withRestarts(s, async (run) => {
      const a = await openSession(run.server);
      const b = await openSession(run.server);
      await a.conn.prompt(a.sse, a.sessionId, "chunks 2000", 60_000);
      await b.conn.prompt(b.sse, b.sessionId, "chunks 300", 30_000);
      const beforeA = delivered(a.sse.events);
      const beforeB = delivered(b.sse.events);
      await run.kill("SIGKILL", a.sse);
      await b.sse.done;
      const files = segments(s.dataDir, a.conn.id);
      assert.ok(files.length >= 4, `segments: ${files.length}`);
      // One byte in the middle of the second segment's frames: its checksum fails.
      const damaged = files[1]!;
      const bytes = readFileSync(damaged);
      bytes[Math.floor(bytes.length / 2)]! ^= 0xff;
      writeFileSync(damaged, bytes);

      await run.start();
      const epoch = epochOf(beforeA[0]!.id);
      const again = a.conn.on(run.server);
      const full = await again.openSse(`${epoch}.0`);
      // The stream delivers what can be read and ends at the damage, never hangs or crashes.
      await ended(full, run.server);
      const got = delivered(full.events);
      assert.ok(got.length >= firstSeqOf(damaged) - 1, `${got.length} events before the damage`);
      assert.ok(
        got.length < firstSeqOf(files[2]!) - 1,
        `${got.length} events: the damaged frame was delivered`,
      );
      assert.deepEqual(got, beforeA.slice(0, got.length));
      await waitFor(() => /event log segment is corrupt/.test(run.server.logs()), 10_000, "the report");
      assert.match(run.server.logs(), new RegExp(path.basename(damaged)));
      // Reconnecting at the last event received: 410, naming where the kept events start.
      const gone = await again.get({ "last-event-id": got.at(-1)!.id });
      assert.equal(gone.status, 410, await gone.clone().text());
      const { oldestEventId } = (await gone.json()) as { oldestEventId: string };
      assert.equal(seqOf(oldestEventId), firstSeqOf(files[2]!) - 1);
      const rest = await again.openSse(oldestEventId);
      const wanted = beforeA.length - seqOf(oldestEventId);
      await waitFor(() => delivered(rest.events).length >= wanted, 10_000, "the events after the damage");
      assert.deepEqual(delivered(rest.events), beforeA.slice(seqOf(oldestEventId)));
      // The connection goes on, numbered after what was there (nothing renumbered).
      await again.prompt(rest, a.sessionId, "echo still here", 30_000);
      assertConsecutive(delivered(rest.events), epoch, seqOf(oldestEventId) + 1);
      // Another connection on the same server: replayed whole.
      const otherEpoch = epochOf(beforeB[0]!.id);
      const other = await b.conn.on(run.server).openSse(`${otherEpoch}.0`);
      await waitFor(() => delivered(other.events).length >= beforeB.length, 10_000, "the other replay");
      assert.deepEqual(delivered(other.events), beforeB);
      assert.equal((await fetch(`${run.server.baseUrl}/v2/health`)).status, 200);
    });
  });

  it("a corrupt frame in the segment being written: the same, and appends go on in a new segment", async () => {
    const s = setup();
    await withRestarts(s, async (run) => {
      const { conn, sse, sessionId } = await openSession(run.server);
      await conn.prompt(sse, sessionId, "chunks 500", 30_000);
      const before = delivered(sse.events);
      await run.kill("SIGTERM", sse);
      const [only] = segments(s.dataDir, conn.id);
      const bytes = readFileSync(only!);
      bytes[Math.floor(bytes.length / 2)]! ^= 0xff;
      writeFileSync(only!, bytes);

      await run.start();
      const again = conn.on(run.server);
      const epoch = epochOf(before[0]!.id);
      const full = await again.openSse(`${epoch}.0`);
      await ended(full, run.server);
      const got = delivered(full.events);
      assert.deepEqual(got, before.slice(0, got.length));
      await waitFor(() => /event log segment is corrupt/.test(run.server.logs()), 10_000, "the report");
      const gone = await again.get({ "last-event-id": `${epoch}.0` });
      assert.equal(gone.status, 410);
      const { oldestEventId } = (await gone.json()) as { oldestEventId: string };
      assert.equal(seqOf(oldestEventId), before.length);
      const rest = await again.openSse(oldestEventId);
      await again.prompt(rest, sessionId, "echo after", 30_000);
      assertConsecutive(delivered(rest.events), epoch, before.length + 1);
    });
  });

  it(
    "disk full (ENOSPC): a clear error in the log, events held not lost, what was written intact; writing resumes once there is room",
    { skip: needService("mount namespaces", mountNamespaceMissing()) },
    async () => {
      await withSmallDisk(async (server, inside) => {
        const { conn, sse, sessionId } = await openSession(server);
        // Leave about 100 KiB: a 3,000-chunk turn (about 500 KiB of events) does not fit.
        const filler = path.join(inside, "filler");
        writeFileSync(filler, Buffer.alloc(1024 * 1024 - 100 * 1024));
        const promptId = await conn.send("session/prompt", {
          sessionId,
          prompt: [{ type: "text", text: "chunks 3000" }],
        });
        await waitFor(() => /cannot write the event log/.test(server.logs()), 30_000, "the ENOSPC report");
        assert.match(server.logs(), /ENOSPC/);
        // The server still serves (health, other requests) while the connection's output is held.
        assert.equal((await fetch(`${server.baseUrl}/v2/health`)).status, 200);
        const held = delivered(sse.events);
        const epoch = epochOf(held[0]!.id);
        assertConsecutive(held, epoch, seqOf(held[0]!.id));
        // What was written reads back whole from the start (this reader takes over the stream).
        const replay = await conn.openSse(`${epoch}.0`);
        await waitFor(() => delivered(replay.events).length >= held.length, 10_000, "the replay");
        assert.deepEqual(delivered(replay.events).slice(0, held.length), held);
        // Room again: the held events are written and delivered, the turn completes, nothing lost.
        rmSync(filler);
        const answer = await answerTo(replay, promptId, 60_000);
        assert.equal(answer.result?.stopReason, "end_turn", JSON.stringify(answer));
        const all = delivered(replay.events);
        assertConsecutive(all, epoch, 1);
        assert.equal(assertChunksInOrder(all.map((e) => JSON.parse(e.data) as RpcMessage)), 3000);
      });
    },
  );

  it(
    "disk full (ENOSPC) when a request is POSTed: it is refused with 503 not_recorded and never runs; sent again once there is room, it runs once",
    { skip: needService("mount namespaces", mountNamespaceMissing()) },
    async () => {
      await withSmallDisk(async (server, inside) => {
        const { conn, sse, sessionId } = await openSession(server);
        // Every page of the tmpfs taken: a write needing one more fails.
        const filler = path.join(inside, "filler");
        const fd = openSync(filler, "w");
        try {
          for (;;) writeSync(fd, Buffer.alloc(4096));
        } catch (error) {
          assert.equal((error as NodeJS.ErrnoException).code, "ENOSPC");
        } finally {
          closeSync(fd);
        }
        // Long ids fill the request journal's last page within a few requests.
        const message = (i: number) => ({
          jsonrpc: "2.0",
          id: `${"r".repeat(900)}-${i}`,
          method: "session/prompt",
          params: { sessionId, prompt: [{ type: "text", text: `echo run-${i}` }] },
        });
        const accepted: string[] = [];
        let refused: ReturnType<typeof message> | undefined;
        for (let i = 0; i < 40 && refused === undefined; i++) {
          const response = await conn.post(message(i));
          if (response.status === 202) accepted.push(message(i).id);
          else {
            assert.equal(response.status, 503, await response.clone().text());
            const problem = (await response.json()) as {
              reason: string;
              reachedAgent: boolean;
              error: string;
            };
            assert.equal(problem.reason, "not_recorded");
            assert.equal(problem.reachedAgent, false);
            assert.match(problem.error, /ENOSPC|short write/);
            refused = message(i);
          }
        }
        assert.ok(refused, "no request was refused");
        // Room again: the refused request was never in flight, so it may be sent again under its id.
        rmSync(filler);
        const again = await conn.post(refused);
        assert.equal(again.status, 202, await again.text());
        for (const id of [...accepted, refused.id])
          await waitFor(
            () => sse.messages().some((m) => m.id === id),
            30_000,
            `the answer to ${id.slice(-4)}`,
          );
        // Its one answer is the second attempt's: the first one never reached the agent.
        assert.equal(sse.messages().filter((m) => m.id === refused.id).length, 1);
        const journal = path.join(inside, conn.id, "requests.journal");
        await waitFor(
          () => openRequests(journal).length === 0,
          10_000,
          "every request settled in the journal",
        );
      });
    },
  );

  it("retention by age: segments older than retentionMs are deleted and a cursor into them gets 410", async () => {
    // Bytes would keep everything (the default 128 MiB): only age can delete.
    const s = setup({ config: { eventLog: { segmentBytes: 32 * 1024, retentionMs: 1500 } } });
    const server = await serve(s);
    try {
      const { conn, sse, sessionId } = await openSession(server);
      await conn.prompt(sse, sessionId, "chunks 2000", 60_000);
      const epoch = epochOf(delivered(sse.events)[0]!.id);
      await waitFor(() => segments(s.dataDir, conn.id).length === 1, 20_000, "old segments deleted by age");
      const gone = await conn.get({ "last-event-id": `${epoch}.1` });
      assert.equal(gone.status, 410);
      const { oldestEventId } = (await gone.json()) as { oldestEventId: string };
      assert.equal(seqOf(oldestEventId), firstSeqOf(segments(s.dataDir, conn.id)[0]!) - 1);
      // A cursor at what is kept resumes.
      const rest = await conn.openSse(oldestEventId);
      await conn.prompt(rest, sessionId, "echo kept", 30_000);
      assertConsecutive(delivered(rest.events), epoch, seqOf(oldestEventId) + 1);
    } finally {
      await server.stop();
    }
  });
});
