import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { tempDir } from "@sandbox-agent/testkit";
import fs from "node:fs";
import type { FrameRanges } from "../src/store/byte-window.js";
import { FRAME_HEADER_BYTES, RECORD_HEADER_BYTES, sealFrame } from "../src/store/frames.js";
import { SegmentFiles } from "../src/store/segments.js";

/** `buf` whole, as the segment writer takes it. */
const whole = (buf: Buffer): FrameRanges => ({ count: 1, bufs: [buf], starts: [0], ends: [buf.length] });

/** Retention of a connection's segment files, byte for byte (the frames' content does not matter here). */
describe("segment retention", () => {
  const limits = { segmentBytes: 1000, retentionBytes: 3000, retentionMs: 3_600_000 };
  const write = (files: SegmentFiles, bytes: number, count = 1) =>
    files.write(whole(Buffer.alloc(bytes, 1)), count, Date.now());

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

/** The sparse index that lets a read start near its event, through writes, rotations and reopening. */
describe("segment index", () => {
  const limits = { segmentBytes: 1024 * 1024, retentionBytes: 64 * 1024 * 1024, retentionMs: 3_600_000 };
  const STRIDE = 64 * 1024;
  const text = (seq: number) => `event ${seq} `.padEnd(200 + ((seq * 37) % 1500), "x");

  /** One frame holding events `first`, `first + 1`… (`count` of them). */
  function frame(first: number, count: number): Buffer {
    const events = Array.from({ length: count }, (_, i) => Buffer.from(text(first + i)));
    const buf = Buffer.alloc(
      FRAME_HEADER_BYTES + events.reduce((n, e) => n + RECORD_HEADER_BYTES + e.length, 0),
    );
    let at = FRAME_HEADER_BYTES;
    for (const event of events) {
      buf.writeUInt32LE(event.length, at);
      event.copy(buf, at + RECORD_HEADER_BYTES);
      at += RECORD_HEADER_BYTES + event.length;
    }
    sealFrame(buf, 0, buf.length, count, Date.now());
    return buf;
  }

  function writeEvents(files: SegmentFiles, through: number): void {
    while (files.nextSeq <= through) {
      const count = Math.min(1 + (files.nextSeq % 3), through - files.nextSeq + 1);
      files.write(whole(frame(files.nextSeq, count)), count, Date.now());
    }
  }

  /** Every event from `from` to `last` read back alone, and the index's entries a stride apart. */
  function assertReadable(files: SegmentFiles, from: number, last: number): void {
    for (let seq = from; seq <= last; seq++) {
      const batch = files.read(seq - 1, 1, last);
      assert.ok(batch, `event ${seq} read`);
      assert.equal(batch.first, seq);
      const bytes = batch.buffers[0]!.subarray(batch.starts[0], batch.ends[0]);
      assert.equal(bytes.toString(), text(seq));
    }
    const { segments } = files as unknown as {
      segments: { bytes: number; index: { entries: Float64Array; count: number } | undefined }[];
    };
    for (const { bytes, index } of segments) {
      assert.ok(index, "every segment read has an index");
      const offsets = Array.from({ length: index.count }, (_, i) => index.entries[2 * i + 1]!);
      assert.equal(offsets[0], 16, "the first entry is the first frame");
      for (let i = 1; i < offsets.length; i++) {
        const gap = offsets[i]! - offsets[i - 1]!;
        assert.ok(gap >= STRIDE && gap < STRIDE + 8 * 1024, `entry ${i}: ${gap} bytes after the one before`);
      }
      assert.ok(
        bytes - offsets.at(-1)! < STRIDE + 8 * 1024,
        `${bytes - offsets.at(-1)!} bytes past the last entry`,
      );
    }
  }

  it("indexes every stride of each segment written, and of each segment reopened, with or without a tail mark", () => {
    const dir = tempDir("segment-index-");
    const files = SegmentFiles.create(dir, 1, limits, false);
    writeEvents(files, 3000); // about 2.9 MB: two segments rotated out and one being written
    assert.ok(fs.readdirSync(dir).length >= 3);
    assertReadable(files, 1, 3000);
    const mark = files.tail();
    files.close();

    // Without a mark: the last segment is scanned from its start, the older ones indexed on first read.
    const scanned = SegmentFiles.open(dir, limits, false)!;
    assert.equal(scanned.repair, undefined);
    writeEvents(scanned.files, 4000);
    assertReadable(scanned.files, 1, 4000);
    const bigger = scanned.files.tail();
    scanned.files.close();

    // With a mark: nothing is read until the first read, which indexes what was written since too.
    const marked = SegmentFiles.open(dir, limits, false, bigger)!;
    writeEvents(marked.files, 4500);
    assertReadable(marked.files, 1, 4500);
    marked.files.remove();
    assert.equal(fs.existsSync(dir), false);
    assert.ok(mark.next === 3001);
  });

  it("indexes a segment of an earlier run larger than segmentBytes is now", () => {
    const dir = tempDir("segment-index-");
    const files = SegmentFiles.create(dir, 1, limits, false);
    writeEvents(files, 1500);
    files.close();
    const smaller = { ...limits, segmentBytes: 128 * 1024 };
    const reopened = SegmentFiles.open(dir, smaller, false)!;
    writeEvents(reopened.files, 1700);
    assertReadable(reopened.files, 1, 1700);
    reopened.files.remove();
  });
});
