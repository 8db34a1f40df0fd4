import assert from "node:assert/strict";
import { appendFileSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import { tempDir, waitFor } from "@sandbox-agent/testkit";
import { DEFAULT_EVENT_LOG_OPTIONS, diskStore } from "../src/store/event-store.js";
import { RequestJournal } from "../src/store/request-journal.js";

const window = { maxEvents: 1000, maxBytes: 1024 * 1024 };

/** The requests a restart would answer: what a fresh open of the journal in `dir` finds. */
const openIn = (dir: string) =>
  RequestJournal.open(dir, false)
    .requests()
    .map((r) => r.id);

describe("request journal: the requests a restart must answer", () => {
  it("replays adds and removes; 1 and '1' are different requests", () => {
    const dir = tempDir("requests-");
    const journal = RequestJournal.create(dir, false);
    for (const id of [1, "1", 2, "x\ny"]) assert.equal(journal.add(id, 1), undefined);
    journal.remove("1");
    journal.remove(7); // never added: nothing written
    assert.deepEqual(openIn(dir), [1, 2, "x\ny"]);
    journal.close();
  });

  it("a last line cut short by a crash is ignored and cut off; the next line starts clean", () => {
    const dir = tempDir("requests-");
    const journal = RequestJournal.create(dir, false);
    journal.add(1, 1);
    journal.add(2, 1);
    journal.close();
    appendFileSync(path.join(dir, "requests.journal"), '-1\n+1 "torn');
    const again = RequestJournal.open(dir, false);
    assert.deepEqual(
      again.requests().map((r) => r.id),
      [2],
    );
    again.add(3, 1);
    assert.deepEqual(openIn(dir), [2, 3]);
    again.close();
  });

  it("is rewritten with the open requests alone at a checkpoint once past 64 KiB, so opening stays cheap", () => {
    const dir = tempDir("requests-");
    const file = path.join(dir, "requests.journal");
    const journal = RequestJournal.create(dir, false);
    journal.add("long-running", 7);
    for (let i = 0; i < 10_000; i++) {
      journal.add(i, 8);
      journal.remove(i);
    }
    assert.ok(statSync(file).size > 64 * 1024);
    journal.checkpoint();
    assert.equal(readFileSync(file, "utf8"), '+7 "long-running"\n');
    journal.add(5, 9);
    assert.deepEqual(openIn(dir), ["long-running", 5]);
    journal.close();
  });

  for (const fsync of [false, true])
    it(`an answered request leaves the journal only once its answer is written${fsync ? " and synced (fsync)" : ""}`, async () => {
      const dataDir = tempDir("requests-store-");
      const store = diskStore(dataDir, { ...DEFAULT_EVENT_LOG_OPTIONS, fsync }, () => {});
      const id = "00000000-0000-4000-8000-000000000001";
      const log = store.createLog(id, window);
      const dir = path.join(dataDir, "event-log", id);
      assert.equal(log.recordRequest(1), undefined);
      log.append('{"jsonrpc":"2.0","method":"x"}');
      log.commit();
      // Answered by the next event, appended but not written yet: still open on disk.
      log.settleRequest(1, log.nextSeq);
      log.append('{"jsonrpc":"2.0","id":1,"result":{}}');
      assert.deepEqual(openIn(dir), [1]);
      log.commit();
      if (fsync) assert.deepEqual(openIn(dir), [1], "settled before the answer was synced");
      await waitFor(() => openIn(dir).length === 0, 5000, "the request settled");
      assert.equal(log.durableSeq, 2);
      store.close();
    });

  it("after a crash between an answer's write and its line: the answer found in the log settles it, not an older answer to the same id", () => {
    const dataDir = tempDir("requests-store-");
    const id = "00000000-0000-4000-8000-000000000002";
    const crashed = diskStore(dataDir, DEFAULT_EVENT_LOG_OPTIONS, () => {});
    const log = crashed.createLog(id, window);
    // "b" was answered once before; its id is used again for a request still in flight.
    log.append('{"jsonrpc":"2.0","id":"b","result":{}}');
    log.commit();
    log.recordRequest("a");
    log.recordRequest("b");
    // The answer to "a" is written, and the process dies before the journal's `-` line.
    log.append('{"result":{"stopReason":"end_turn"},"id":"a","jsonrpc":"2.0"}');
    log.commit();
    // No close: the next store takes the lock of a process that is gone (here: this one).
    const store = diskStore(dataDir, DEFAULT_EVENT_LOG_OPTIONS, () => {});
    const opened = store.openLog(id, window);
    assert.deepEqual(opened?.log.unansweredRequests(), ["b"]);
    assert.deepEqual(openIn(path.join(dataDir, "event-log", id)), ["b"]);
    store.close();
  });
});
