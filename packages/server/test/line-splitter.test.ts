import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LineSplitter } from "../src/runtime/line-splitter.js";

describe("agent output lines", () => {
  it("are the same whatever the chunking, multi-byte characters and CRLF included", () => {
    const lines: string[] = [];
    for (let i = 0; i < 2000; i++)
      lines.push(
        i % 7 === 0 ? "" : i % 11 === 0 ? "\r" : `{"t":"héllo ✓ 😀 ${i}"}${i % 5 === 0 ? "\r" : ""}`,
      );
    const data = Buffer.from(lines.join("\n") + "\n");
    const expected = lines
      .filter((l) => l.length > 0 && l !== "\r")
      .map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l));
    // Chunk sizes from 1 byte (every character cut) to several hundred lines per chunk.
    for (const size of [1, 2, 3, 5, 17, 64, 1000, 65536]) {
      const got: string[] = [];
      const splitter = new LineSplitter(
        1e6,
        (line) => got.push(line),
        () => assert.fail("no line is over the limit"),
      );
      for (let at = 0; at < data.length; at += size) splitter.push(data.subarray(at, at + size));
      assert.deepEqual(got, expected, `chunks of ${size} bytes`);
    }
  });

  it("reports a partial line over the limit", () => {
    const sizes: number[] = [];
    const splitter = new LineSplitter(
      10,
      () => assert.fail("no line"),
      (bytes) => sizes.push(bytes),
    );
    splitter.push(Buffer.from("0123456"));
    splitter.push(Buffer.from("789abc"));
    assert.deepEqual(sizes, [13]);
  });
});
