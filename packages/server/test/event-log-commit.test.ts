import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import zlib from "node:zlib";
import { tempDir, waitFor } from "@sandbox-agent/testkit";
import { EventLog } from "../src/runtime/event-log.js";
import { Outbound } from "../src/runtime/outbound.js";
import { ByteWindow, type FrameBytes } from "../src/store/byte-window.js";
import { batchLength } from "../src/store/event-batch.js";
import { DEFAULT_EVENT_LOG_OPTIONS, diskStore } from "../src/store/event-store.js";
import { FRAME_HEADER_BYTES, readFrame } from "../src/store/frames.js";

const limits = { maxEvents: 1000, maxBytes: 1024 * 1024 };

/** The bytes `sealed` handed over, as one buffer. */
function bytesOf(frames: FrameBytes): Buffer {
  return Array.isArray(frames) ? Buffer.concat(frames) : frames.buf.subarray(frames.start, frames.end);
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

  it("one slab with unwritten frames: sealed hands over its range, not views; several slabs: a view of each, oldest first", () => {
    const window = new ByteWindow(limits, 1, true);
    window.append("a");
    window.append("b");
    const one = window.sealed(0)!;
    assert.equal(Array.isArray(one), false);
    assert.deepEqual(frameCounts(bytesOf(one)), [2]);
    window.markTaken();
    assert.equal(window.sealed(0), undefined, "nothing left once taken");
    // The first slab is 4 KiB: the second 3 KiB event opens a new slab (and seals the first's frame).
    window.append("c");
    window.append("x".repeat(3000));
    window.append("y".repeat(3000));
    window.append("d");
    const several = window.sealed(0)!;
    assert.ok(Array.isArray(several), "views of two slabs");
    assert.equal(several.length, 2);
    assert.deepEqual(
      several.map((view) => frameCounts(view)),
      [[2], [2]],
    );
    window.markTaken();
    assert.equal(window.sealed(0), undefined);
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
