import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import zlib from "node:zlib";
import { tempDir, waitFor } from "@sandbox-agent/testkit";
import { EventLog } from "../src/runtime/event-log.js";
import { Outbound } from "../src/runtime/outbound.js";
import { ByteWindow, type FrameRanges } from "../src/store/byte-window.js";
import { batchLength } from "../src/store/event-batch.js";
import { DEFAULT_EVENT_LOG_OPTIONS, diskStore } from "../src/store/event-store.js";
import { FRAME_HEADER_BYTES, readFrame } from "../src/store/frames.js";
import { SegmentFiles } from "../src/store/segments.js";

const limits = { maxEvents: 1000, maxBytes: 1024 * 1024 };

/** The bytes of each range `sealed` handed over. */
function rangesOf(frames: FrameRanges): Buffer[] {
  return Array.from({ length: frames.count }, (_, i) =>
    frames.bufs[i]!.subarray(frames.starts[i], frames.ends[i]),
  );
}

/** The bytes `sealed` handed over, as one buffer. */
function bytesOf(frames: FrameRanges): Buffer {
  return Buffer.concat(rangesOf(frames));
}

/** The event count of each frame in `bytes` (each must be whole and pass its checksum). */
function frameCounts(bytes: Buffer): number[] {
  const counts: number[] = [];
  for (let at = 0; at < bytes.length;) {
    const frame = readFrame(bytes, at);
    assert.equal(typeof frame, "object", `frame at ${at}: ${String(frame)}`);
    if (typeof frame === "string") break;
    counts.push(frame.count);
    at += frame.bytes;
  }
  return counts;
}

describe("event log commit", () => {
  it("a frame's checksum is zlib's crc32 of its count, payload bytes, time and payload (the on-disk format)", () => {
    const window = new ByteWindow(limits, 1, true);
    window.append('{"jsonrpc":"2.0","method":"session/update"}');
    window.append(`{"text":"${"é".repeat(300)}"}`);
    const frames = window.sealed(1733342400123.5)!;
    const frame = bytesOf(frames);
    const expected = zlib.crc32(
      Buffer.concat([frame.subarray(4, 12), frame.subarray(16, 24), frame.subarray(FRAME_HEADER_BYTES)]),
    );
    assert.equal(frame.readUInt32LE(12), expected);
    assert.deepEqual(frameCounts(frame), [2]);
  });

  it("sealed hands over a range of each slab with unwritten frames, oldest first, in one reused object", () => {
    const window = new ByteWindow(limits, 1, true);
    window.append("a");
    window.append("b");
    const one = window.sealed(0)!;
    assert.equal(one.count, 1);
    assert.deepEqual(frameCounts(bytesOf(one)), [2]);
    window.markTaken();
    assert.equal(window.sealed(0), undefined, "nothing left once taken");
    // The first slab is 4 KiB: the second 3 KiB event opens a new slab (and seals the first's frame).
    window.append("c");
    window.append("x".repeat(3000));
    window.append("y".repeat(3000));
    window.append("d");
    const several = window.sealed(0)!;
    assert.equal(several, one, "the same object");
    assert.equal(several.count, 2, "a range of each of two slabs");
    assert.deepEqual(
      rangesOf(several).map((range) => frameCounts(range)),
      [[2], [2]],
    );
    const written = several.bufs.slice(0, several.count);
    window.markTaken();
    // Written: the ranges hold no slab's buffer any more (one trim releases stays collectable).
    assert.ok(written.every((buf) => buf.length > 0));
    assert.ok(
      several.bufs.every((buf) => buf.length === 0),
      "no buffer kept after markTaken",
    );
    assert.equal(window.sealed(0), undefined);
  });

  it("frames unwritten in more slabs than sealed has room for: a range of each, written whole to the segment", () => {
    const dataDir = tempDir("commit-slabs-");
    const window = new ByteWindow({ maxEvents: 100_000, maxBytes: 64 * 1024 * 1024 }, 1, true);
    // Slabs of 4, 8, 16, 32, 64 and 128 KiB, all filled before one commit: six ranges.
    const events = Array.from({ length: 60 }, (_, i) =>
      `${i} `.padEnd(4000, String.fromCharCode(97 + (i % 26))),
    );
    for (const event of events) window.append(event);
    const frames = window.sealed(0)!;
    assert.ok(frames.count > 4, `${frames.count} ranges`);
    const files = SegmentFiles.create(
      dataDir,
      1,
      { segmentBytes: 1 << 20, retentionBytes: 1 << 30, retentionMs: 1e9 },
      false,
    );
    files.write(frames, events.length, 0);
    window.markTaken();
    const batch = files.read(0, 1 << 30, events.length)!;
    assert.equal(batchLength(batch), events.length);
    assert.deepEqual(
      Array.from({ length: events.length }, (_, i) =>
        batch.buffers[i]!.toString("utf8", batch.starts[i], batch.ends[i]),
      ),
      events,
    );
    files.remove();
  });

  for (const fsync of [false, true])
    it(`write before deliver: a reader woken by a commit finds what it reads in the segment file already, once per commit${fsync ? " (fsync)" : ""}`, async () => {
      const dataDir = tempDir("commit-");
      const store = diskStore(dataDir, { ...DEFAULT_EVENT_LOG_OPTIONS, fsync }, () => {});
      const id = "00000000-0000-4000-8000-0000000000c1";
      const log = store.createLog(id, limits);
      const segment = () => {
        const dir = path.join(dataDir, "event-log", id);
        return readFileSync(
          path.join(
            dir,
            readdirSync(dir).find((n) => n.endsWith(".log"))!,
          ),
        );
      };
      const outbound = new Outbound(new EventLog(log), {
        maxBufferedBytes: 1 << 20,
        stallMs: 60_000,
        pause: () => {},
        resume: () => {},
        stalled: () => {},
        readerChanged: () => {},
        corrupt: (error) => assert.fail(error),
      });
      const received: string[] = [];
      let wakes = 0;
      const reader = outbound.openReader(undefined, {
        readable() {
          wakes++;
          const onDisk = segment();
          for (let batch; (batch = reader.read(1 << 20)) !== undefined;)
            for (let i = 0; i < batchLength(batch); i++) {
              const event = batch.buffers[i]!.subarray(batch.starts[i], batch.ends[i]);
              assert.ok(onDisk.includes(event), `event ${batch.first + i} read before it was written`);
              received.push(event.toString());
            }
        },
        end: () => {},
      });
      const sent: string[] = [];
      // Commits of one event, of several, and of several spanning two slabs (3 KiB events).
      for (const sizes of [[10], [10, 20, 30], [3000, 3000, 10], [10]]) {
        const before = wakes;
        for (const size of sizes) {
          const event = `{"n":${sent.length},"pad":"${"p".repeat(size)}"}`;
          sent.push(event);
          outbound.append(event);
        }
        assert.equal(received.length, sent.length - sizes.length, "nothing is read before the commit");
        await waitFor(() => received.length === sent.length, 5000, "the commit's events");
        // Without fsync the commit wakes the reader once, after the write; with it, the commit's
        // wake finds nothing (not synced yet) and the group commit's wake reads the events.
        assert.equal(wakes - before, fsync ? 2 : 1, `wakes for ${sizes.length} events`);
      }
      assert.deepEqual(received, sent);
      reader.close();
      outbound.close();
      store.close();
    });
});
