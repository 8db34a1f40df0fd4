import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EventLog } from "../src/runtime/event-log.js";
import { memoryStore } from "../src/store/event-store.js";

/** An event log in memory that keeps every event. */
function eventLog(): EventLog {
  return new EventLog(memoryStore().createLog("c", { maxEvents: 1e6, maxBytes: 1e9 }));
}

describe("the event log's unread events", () => {
  it("counts the bytes no reader received yet, whether the reader keeps up or falls behind", () => {
    const log = eventLog();
    let appended = 0;
    let read = 0;
    const sizes: number[] = [];
    // Rounds where the reader catches up, falls behind by some events and catches up again, past
    // the 1,024 events after which a reader that stays behind has its queue compacted.
    for (let round = 0; round < 400; round++) {
      const events = 1 + (round % 9);
      for (let i = 0; i < events; i++) {
        const data = `{"n":${appended},"pad":"${"x".repeat((appended * 7) % 50)}"}`;
        assert.equal(log.append(data), appended + 1);
        sizes.push(data.length);
        appended++;
      }
      // Every third round the reader stops short of the newest events; the others it catches up.
      const to = round % 3 === 0 ? Math.max(read, appended - 2 - (round % 5)) : appended;
      if (to > read) log.markWritten(to);
      read = Math.max(read, to);
      const unread = sizes.slice(read).reduce((sum, n) => sum + n, 0);
      assert.equal(log.unwrittenBytes, unread, `round ${round}`);
      assert.equal(log.writtenSeq, read);
    }
  });

  it("keeps counting right for a reader that stays behind past a compaction", () => {
    const log = eventLog();
    for (let i = 0; i < 3000; i++) log.append("x".repeat(10));
    // Reads 2,500 of 3,000 one event at a time: the queue is compacted on the way (past 1,024 read).
    for (let seq = 1; seq <= 2500; seq++) log.markWritten(seq);
    assert.equal(log.unwrittenBytes, 500 * 10);
    log.append("y".repeat(7));
    log.markWritten(2999);
    assert.equal(log.unwrittenBytes, 10 + 7);
    log.markWritten(3001);
    assert.equal(log.unwrittenBytes, 0);
    // Caught up: what comes next counts from zero.
    log.append("z".repeat(3));
    assert.equal(log.unwrittenBytes, 3);
  });
});
