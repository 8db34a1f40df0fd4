import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { tempDir } from "@sandbox-agent/testkit";
import { SegmentFiles } from "../src/store/segments.js";

/** Retention of a connection's segment files, byte for byte (the frames' content does not matter here). */
describe("segment retention", () => {
  const limits = { segmentBytes: 1000, retentionBytes: 3000, retentionMs: 3_600_000 };
  const write = (files: SegmentFiles, bytes: number, count = 1) =>
    files.write([Buffer.alloc(bytes, 1)], count, Date.now());

  it("keeps the newest retentionBytes even when one busy write filled a segment far past segmentBytes", () => {
    const files = SegmentFiles.create(tempDir("segments-"), 1, limits, false);
    for (let i = 0; i < 6; i++) write(files, 900); // events 1..6, a segment each
    write(files, 5000, 300); // events 7..306 in one write: a segment of their own
    write(files, 100, 3); // events 307..309 start a new segment
    // The big segment alone holds the newest 3,000 bytes: it stays, and only what is older goes.
    assert.equal(files.retain(Date.now()), 7);
    assert.ok(files.bytes >= limits.retentionBytes, `${files.bytes} bytes kept`);
    files.remove();
  });

  it("deletes a segment once the newer ones hold retentionBytes, so the disk holds at most two segments more", () => {
    const files = SegmentFiles.create(tempDir("segments-"), 1, limits, false);
    for (let i = 0; i < 40; i++) {
      write(files, 450);
      // Checked at each new segment: the oldest may have just gone over, the newest is still filling.
      assert.ok(
        files.bytes <= limits.retentionBytes + 2 * limits.segmentBytes,
        `${files.bytes} bytes after write ${i}`,
      );
    }
    // Two 450-byte events to a segment (916 bytes with its header): the newest 3,000 bytes need four, events 33..40.
    const oldest = files.retain(Date.now());
    assert.ok(files.bytes >= limits.retentionBytes, `${files.bytes} bytes kept`);
    assert.equal(oldest, 33);
    files.remove();
  });

  it("deletes by age whatever the size, never the segment being written", () => {
    const files = SegmentFiles.create(tempDir("segments-"), 1, limits, false);
    for (let i = 0; i < 3; i++) write(files, 900);
    assert.equal(files.retain(Date.now() + 2 * limits.retentionMs), 3);
    files.remove();
  });
});
