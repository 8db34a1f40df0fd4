import assert from "node:assert/strict";
import { appendFileSync, cpSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import { tempDir, waitFor } from "@sandbox-agent/testkit";
import { delivered, epochOf, openRequests, setup, withRestarts } from "./support/durable.js";
import { openSession, type RawConnection, type RpcMessage } from "./support/rpc.js";
import { DEFAULT_EVENT_LOG_OPTIONS, diskStore } from "../src/store/event-store.js";
import { RequestJournal } from "../src/store/request-journal.js";

const window = { maxEvents: 1000, maxBytes: 1024 * 1024 };

/** The requests a restart would answer: what a fresh open of the journal in `dir` finds. */
const openIn = (dir: string) =>
  RequestJournal.open(dir, false)
    .requests()
    .map((r) => r.id);

/**
 * What a restart would answer if the process were killed now: the data directory copied as it is
 * (a SIGKILL leaves the files as the last `write` left them) and opened by a second store.
 */
function afterKill(dataDir: string, id: string): Array<string | number> | undefined {
  const copy = tempDir("requests-killed-");
  cpSync(dataDir, copy, { recursive: true });
  const store = diskStore(copy, DEFAULT_EVENT_LOG_OPTIONS, () => {});
  const opened = store.openLog(id, window);
  const open = opened?.log.unansweredRequests();
  store.close();
  return open;
}

describe("request journal: the requests a restart must answer", () => {
  it("replays adds, `=` lines and the `-` lines of earlier servers; 1 and '1' are different requests", () => {
    const dir = tempDir("requests-");
    const journal = RequestJournal.create(dir, false);
    for (const id of [1, "1", 2, "x\ny"]) assert.equal(journal.add(id, 1), undefined);
    // An answer writes nothing: the log holds it.
    const size = statSync(path.join(dir, "requests.journal")).size;
    journal.remove("1");
    journal.remove(7); // never added
    assert.equal(statSync(path.join(dir, "requests.journal")).size, size);
    assert.deepEqual(openIn(dir), [1, "1", 2, "x\ny"]);
    journal.close();
    appendFileSync(path.join(dir, "requests.journal"), '-"1"\n=[[5,2],[6,"x\\ny"]]\n+9 3\n');
    const again = RequestJournal.open(dir, false);
    assert.deepEqual(again.requests(), [
      { id: 2, since: 5 },
      { id: "x\ny", since: 6 },
      { id: 3, since: 9 },
    ]);
    assert.equal(again.oldestSince(), 5);
    again.close();
  });

  it("a last line cut short by a crash is ignored and cut off; the next line starts clean", () => {
    const dir = tempDir("requests-");
    const journal = RequestJournal.create(dir, false);
    journal.add(1, 1);
    journal.add(2, 1);
    journal.close();
    appendFileSync(path.join(dir, "requests.journal"), '=[[1,2]]\n+1 "torn');
    const again = RequestJournal.open(dir, false);
    assert.deepEqual(
      again.requests().map((r) => r.id),
      [2],
    );
    again.add(3, 1);
    assert.deepEqual(openIn(dir), [2, 3]);
    again.close();
  });

  it("a checkpoint compacts: cut to nothing when no request is open, else one `=` line with seqs past the durable events; past 64 KiB rewritten", () => {
    const dir = tempDir("requests-");
    const file = path.join(dir, "requests.journal");
    const journal = RequestJournal.create(dir, false);
    for (let i = 0; i < 100; i++) {
      journal.add(i, i + 1);
      journal.remove(i);
    }
    journal.checkpoint(100);
    assert.equal(readFileSync(file, "utf8"), "");
    journal.checkpoint(100); // nothing to do: nothing written
    journal.add("long-running", 101);
    journal.add(5, 101);
    journal.remove(5);
    journal.checkpoint(150);
    const compacted = '+101 "long-running"\n+101 5\n=[[151,"long-running"]]\n';
    assert.equal(readFileSync(file, "utf8"), compacted);
    // No new events and nothing answered: nothing written.
    journal.checkpoint(150);
    assert.equal(readFileSync(file, "utf8"), compacted);
    // The long-running request answered: nothing open, the file is cut at once.
    journal.remove("long-running");
    assert.equal(readFileSync(file, "utf8"), "");
    journal.add("long-running", 160);
    for (let i = 0; i < 10_000; i++) {
      journal.add(i, 200);
      journal.remove(i);
    }
    assert.ok(statSync(file).size > 64 * 1024);
    journal.checkpoint(20_000);
    assert.equal(readFileSync(file, "utf8"), '+20001 "long-running"\n');
    journal.add(5, 20_002);
    assert.deepEqual(openIn(dir), ["long-running", 5]);
    journal.close();
  });

  for (const fsync of [false, true])
    it(`an answered request leaves the open set only once its answer is written${fsync ? " and synced (fsync)" : ""}; a kill finds it answered in the log`, async () => {
      const dataDir = tempDir("requests-store-");
      const store = diskStore(dataDir, { ...DEFAULT_EVENT_LOG_OPTIONS, fsync }, () => {});
      const id = "00000000-0000-4000-8000-000000000001";
      const log = store.createLog(id, window);
      assert.equal(log.recordRequest(1), undefined);
      log.append('{"jsonrpc":"2.0","method":"x"}');
      log.commit();
      // Answered by the next event, appended but not written yet: a kill now answers it again.
      log.settleRequest(1, log.nextSeq);
      log.append('{"jsonrpc":"2.0","id":1,"result":{}}');
      assert.deepEqual(afterKill(dataDir, id), [1]);
      log.commit();
      // Written: a kill finds the answer in the segment, though the journal still names it.
      assert.deepEqual(afterKill(dataDir, id), []);
      assert.deepEqual(openIn(path.join(dataDir, "event-log", id)), [1]);
      if (fsync) assert.deepEqual(log.unansweredRequests(), [1], "settled before the answer was synced");
      await waitFor(() => log.unansweredRequests().length === 0, 5000, "the request settled");
      assert.equal(log.durableSeq, 2);
      // The checkpoint (about a second) cuts the journal to nothing: no request is open.
      await waitFor(
        () => statSync(path.join(dataDir, "event-log", id, "requests.journal")).size === 0,
        5000,
        "compacted",
      );
      store.close();
    });

  it("after a crash: an answer in the log settles its request, not an older answer to the same id; the journal is compacted at close", () => {
    const dataDir = tempDir("requests-store-");
    const id = "00000000-0000-4000-8000-000000000002";
    const crashed = diskStore(dataDir, DEFAULT_EVENT_LOG_OPTIONS, () => {});
    const log = crashed.createLog(id, window);
    // "b" was answered once before; its id is used again for a request still in flight.
    log.append('{"jsonrpc":"2.0","id":"b","result":{}}');
    log.commit();
    log.recordRequest("a");
    log.recordRequest("b");
    // The answer to "a" is written; the process dies before any checkpoint.
    log.append('{"result":{"stopReason":"end_turn"},"id":"a","jsonrpc":"2.0"}');
    log.commit();
    // No close: the next store takes the lock of a process that is gone (here: this one).
    const store = diskStore(dataDir, DEFAULT_EVENT_LOG_OPTIONS, () => {});
    const opened = store.openLog(id, window);
    assert.deepEqual(opened?.log.unansweredRequests(), ["b"]);
    store.close();
    assert.deepEqual(openIn(path.join(dataDir, "event-log", id)), ["b"]);
  });

  it("a damaged segment between a request and its answer is skipped: the answer after it still counts", () => {
    const dataDir = tempDir("requests-store-");
    const store = diskStore(dataDir, { ...DEFAULT_EVENT_LOG_OPTIONS, segmentBytes: 2048 }, () => {});
    const id = "00000000-0000-4000-8000-000000000004";
    const log = store.createLog(id, window);
    log.recordRequest("a");
    for (let i = 0; i < 100; i++) {
      log.append(`{"jsonrpc":"2.0","method":"session/update","params":{"n":${i}}}`);
      if (i % 10 === 9) log.commit();
    }
    log.settleRequest("a", log.nextSeq);
    log.append('{"jsonrpc":"2.0","id":"a","result":{}}');
    log.commit();
    const dir = path.join(dataDir, "event-log", id);
    const segments = readdirSync(dir)
      .filter((f) => f.endsWith(".log"))
      .sort((x, y) => parseInt(x) - parseInt(y));
    assert.ok(segments.length >= 3, `${segments.length} segments`);
    const damaged = path.join(dir, segments[1]!);
    const bytes = readFileSync(damaged);
    bytes[Math.floor(bytes.length / 2)]! ^= 0xff;
    writeFileSync(damaged, bytes);
    assert.deepEqual(afterKill(dataDir, id), []);
    store.close();
  });

  it("a request open across many events: each checkpoint moves its seq on, so recovery reads about a second of events, not the whole prompt", async () => {
    const dataDir = tempDir("requests-store-");
    const store = diskStore(dataDir, DEFAULT_EVENT_LOG_OPTIONS, () => {});
    const id = "00000000-0000-4000-8000-000000000003";
    const log = store.createLog(id, window);
    log.recordRequest("prompt");
    for (let i = 0; i < 1000; i++) log.append('{"jsonrpc":"2.0","method":"session/update"}');
    log.commit();
    const dir = path.join(dataDir, "event-log", id);
    await waitFor(
      () => RequestJournal.open(dir, false).oldestSince() === 1001,
      5000,
      "the checkpoint's `=` line",
    );
    assert.deepEqual(afterKill(dataDir, id), ["prompt"]);
    log.settleRequest("prompt", log.nextSeq);
    log.append('{"jsonrpc":"2.0","id":"prompt","result":{}}');
    log.commit();
    assert.deepEqual(afterKill(dataDir, id), []);
    store.close();
  });
});

/** The answers (JSON-RPC responses) among `events`, by request id. */
function answersById(events: Array<{ data: string }>): Map<unknown, RpcMessage[]> {
  const answers = new Map<unknown, RpcMessage[]>();
  for (const { data } of events) {
    const message = JSON.parse(data) as RpcMessage;
    if (message.method !== undefined || message.id === undefined) continue;
    answers.set(message.id, [...(answers.get(message.id) ?? []), message]);
  }
  return answers;
}

/** Reads the whole log back (`epoch.0`) until request `last` is answered; fails unless every request was answered once. */
async function answeredOnce(
  conn: RawConnection,
  epoch: string,
  last: number,
): Promise<Map<unknown, RpcMessage[]>> {
  const full = await conn.openSse(`${epoch}.0`);
  await full.waitFor((m) => m.id === last && m.method === undefined, 30_000);
  full.close();
  const answers = answersById(delivered(full.events));
  for (const [id, all] of answers)
    assert.equal(all.length, 1, `request ${String(id)} answered ${all.length} times`);
  return answers;
}

describe("request journal: a server killed around an answer", () => {
  it("SIGKILL as an answer arrives, its `+` line still in the journal: not answered again after the restart", async () => {
    const s = setup();
    await withRestarts(s, async (run) => {
      const opened = await openSession(run.server);
      const { sessionId } = opened;
      let { conn, sse } = opened;
      const journal = path.join(s.dataDir, "event-log", conn.id, "requests.journal");
      const epoch = epochOf(delivered(sse.events)[0]!.id);
      let answered: RpcMessage | undefined;
      // The checkpoint (about once a second) may compact the line away between the answer and
      // the kill: then the next turn tries again.
      for (let attempt = 0; answered === undefined; attempt++) {
        assert.ok(attempt < 10, "the checkpoint compacted the line before every kill");
        const answer = await conn.prompt(sse, sessionId, `echo ${attempt}`);
        await run.kill("SIGKILL", sse);
        if (openRequests(journal).includes(String(answer.id))) answered = answer;
        conn = conn.on(await run.start());
        sse = await conn.openSse(sse.lastId());
      }
      assert.equal(answered.result?.stopReason, "end_turn");
      // The connection goes on; the whole log read back holds the killed turn's one answer.
      const after = await conn.prompt(sse, sessionId, "echo after");
      const answers = await answeredOnce(conn, epoch, after.id as number);
      assert.deepEqual(answers.get(answered.id), [answered]);
    });
  });

  it("SIGKILL at random points of concurrent turns, three times: every acknowledged request answered exactly once", async () => {
    const s = setup();
    await withRestarts(s, async (run) => {
      const first = await openSession(run.server);
      let { conn, sse } = first;
      const epoch = epochOf(delivered(sse.events)[0]!.id);
      const sessions = [first.sessionId, await conn.newSession(sse), await conn.newSession(sse)];
      const accepted = new Set<number>();
      const turns = ["echo a", "sleep 40", "chunks 30", "slow 5 10"];
      for (let round = 0; round < 3; round++) {
        let killed = false;
        let answers = 0;
        // Each session runs turns one after another until the kill, which comes after 4–10 answers.
        const drivers = sessions.map(async (sessionId, k) => {
          for (let i = k; !killed; i++) {
            let id: number;
            try {
              id = await conn.send("session/prompt", {
                sessionId,
                prompt: [{ type: "text", text: turns[i % 4]! }],
              });
            } catch {
              return; // cut by the kill: its fate is unknown to the client
            }
            accepted.add(id);
            const reader = sse;
            await waitFor(
              () => killed || reader.messages().some((m) => m.id === id && m.method === undefined),
              30_000,
              `the answer to ${id}`,
            );
            answers++;
          }
        });
        await waitFor(() => answers >= 4 + round * 3, 30_000, `${4 + round * 3} answers`);
        killed = true;
        await run.kill("SIGKILL", sse);
        await Promise.all(drivers);
        conn = conn.on(await run.start());
        sse = await conn.openSse(sse.lastId());
      }
      const last = (await conn.prompt(sse, sessions[0]!, "echo after")).id as number;
      const answers = await answeredOnce(conn, epoch, last);
      // Answered once each (a result, or server_restarted for those the kill caught in flight).
      for (const id of accepted)
        assert.equal(answers.get(id)?.length, 1, `request ${id}: ${JSON.stringify(answers.get(id))}`);
      assert.ok(accepted.size >= 20, `${accepted.size} requests`);
    });
  });

  it("many turns: the journal stays within about a second of requests, and is cut to nothing once none is open", async () => {
    const s = setup();
    await withRestarts(s, async (run) => {
      const { conn, sse, sessionId } = await openSession(run.server);
      const journal = path.join(s.dataDir, "event-log", conn.id, "requests.journal");
      let largest = 0;
      const start = Date.now();
      let turns = 0;
      // At least 200 turns and 3 s, so that several checkpoints pass.
      for (; turns < 200 || Date.now() - start < 3000; turns++) {
        await conn.prompt(sse, sessionId, "echo x");
        largest = Math.max(largest, statSync(journal).size);
      }
      const perSecond = (turns * 1000) / (Date.now() - start);
      // A line is `+<seq> <id>\n`, under 16 bytes here: two seconds of them, and slack for `=` lines.
      assert.ok(largest < 2 * 16 * perSecond + 256, `${largest} bytes at ${perSecond.toFixed(0)} turns/s`);
      await waitFor(() => statSync(journal).size === 0, 5000, "the journal cut to nothing");
    });
  });
});
