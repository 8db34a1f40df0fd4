import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ByteWindow } from "../src/store/byte-window.js";
import type { EventBatch } from "../src/store/event-batch.js";

/** Every event of the batch as a string. */
function batchTexts(batch: EventBatch): string[] {
  return batch.starts.map((start, i) => batch.buffers[i]!.toString("utf8", start, batch.ends[i]));
}

/** What a connection log does after each commit: a file-backed window hands its frames over first. */
function commit(window: ByteWindow, backedByFile: boolean): void {
  if (backedByFile) {
    window.sealed(0);
    window.markTaken();
  }
  window.trim();
}

describe("the replay window", () => {
  for (const backedByFile of [false, true]) {
    const kind = backedByFile ? "backed by a file" : "in memory";

    it(`keeps the newest maxEvents events across commits of many sizes (${kind})`, () => {
      const window = new ByteWindow({ maxEvents: 100, maxBytes: 1e9 }, 1, backedByFile);
      for (let i = 1; i <= 5000; i++) {
        window.append(`event ${i} ${"x".repeat(i % 300)}`);
        if (i % 7 === 0) commit(window, backedByFile);
      }
      commit(window, backedByFile);
      assert.equal(window.firstSeq, 4901);
      const batch = window.read(4900, 1e9)!;
      const data = batchTexts(batch);
      assert.equal(batch.first, 4901);
      assert.equal(data.length, 100);
      assert.match(data[0]!, /^event 4901 /);
      assert.match(data[99]!, /^event 5000 /);
    });

    it(`stays within maxBytes, framing included (${kind})`, () => {
      const window = new ByteWindow({ maxEvents: 1e9, maxBytes: 10_000 }, 1, backedByFile);
      for (let i = 1; i <= 5000; i++) {
        window.append(`e${i} ${"y".repeat(100)}`);
        commit(window, backedByFile);
      }
      const kept = window.nextSeq - window.firstSeq;
      // 105-byte events, each with a 4-byte length, and a 24-byte frame header each when every event is its own commit.
      const perEvent = backedByFile ? 133 : 109;
      assert.ok(
        kept <= Math.floor(10_000 / perEvent) && kept >= Math.floor(10_000 / perEvent) - 2,
        String(kept),
      );
      const data = batchTexts(window.read(window.firstSeq - 1, 1e9)!);
      assert.equal(data.length, kept);
      assert.match(data.at(-1)!, /^e5000 /);
    });
  }

  it("never drops events the segment writer has not taken, and always keeps the newest", () => {
    const file = new ByteWindow({ maxEvents: 2, maxBytes: 1 }, 1, true);
    const memory = new ByteWindow({ maxEvents: 2, maxBytes: 1 }, 1, false);
    for (let i = 1; i <= 50; i++) {
      file.append(`z${i}`);
      memory.append(`z${i}`);
    }
    file.trim();
    memory.trim();
    assert.equal(file.firstSeq, 1);
    assert.equal(memory.firstSeq, 50);
    commit(file, true);
    assert.equal(file.firstSeq, 50);
    const batch = file.read(49, 1e9)!;
    assert.equal(batch.first, 50);
    assert.deepEqual(batchTexts(batch), ["z50"]);
  });

  for (const backedByFile of [false, true]) {
    it(`keeps the events after the held seq past its limits, and reads no further than asked (${backedByFile ? "backed by a file" : "in memory"})`, () => {
      const window = new ByteWindow({ maxEvents: 2, maxBytes: 1 }, 1, backedByFile);
      window.hold(10);
      for (let i = 1; i <= 50; i++) {
        window.append(`h${i}`);
        if (i % 5 === 0) commit(window, backedByFile);
      }
      assert.equal(window.firstSeq, 11);
      assert.deepEqual(batchTexts(window.read(10, 1e9, 12)!), ["h11", "h12"]);
      assert.deepEqual(batchTexts(window.read(10, 4)!), ["h11", "h12"]); // up to maxBytes, at least one
      window.hold(48);
      commit(window, backedByFile);
      assert.equal(window.firstSeq, 49);
    });
  }
});
