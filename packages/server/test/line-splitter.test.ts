import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LineSplitter } from "../src/runtime/line-splitter.js";

/** The lines `data` splits into when pushed in chunks of `size` bytes, as their bytes. */
function split(data: Buffer, size: number, maxLineBytes = 1e7): Buffer[] {
  const got: Buffer[] = [];
  const splitter = new LineSplitter(
    maxLineBytes,
    (chunk, start, end) => got.push(Buffer.from(chunk.subarray(start, end))),
    () => assert.fail("no line is over the limit"),
  );
  for (let at = 0; at < data.length; at += size) splitter.push(data.subarray(at, at + size));
  return got;
}

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
    for (const size of [1, 2, 3, 5, 17, 64, 1000, 65536])
      assert.deepEqual(
        split(data, size).map((line) => line.toString("utf8")),
        expected,
        `chunks of ${size} bytes`,
      );
  });

  it("are the agent's bytes, not decoded: invalid UTF-8 and inner CRs pass as they are", () => {
    const lines = [
      Buffer.from([0x7b, 0xff, 0xc3, 0x28, 0xed, 0xa0, 0x80, 0x7d]), // invalid sequences
      Buffer.from('{\r"a":\r1}', "utf8"), // CRs inside, none at the end
      Buffer.from([0xf0, 0x9f, 0x98]), // a character cut short at the line's end
      Buffer.from("\r\r", "latin1"), // only the CR before the LF is the line break's
    ];
    const data = Buffer.concat(lines.flatMap((line) => [line, Buffer.from("\r\n")]));
    const expected = [...lines]; // each written with CRLF after it
    for (const size of [1, 2, 7, 1000])
      assert.deepEqual(split(data, size), expected, `chunks of ${size} bytes`);
  });

  it("joins a huge line from many chunks, up to the limit", () => {
    const huge = Buffer.alloc(5 * 1024 * 1024 + 3, "é");
    const data = Buffer.concat([Buffer.from("a\n"), huge, Buffer.from("\r\nb\n")]);
    for (const size of [65536, 4093]) {
      const got = split(data, size, huge.length);
      assert.equal(got.length, 3);
      assert.ok(got[1]!.equals(huge), `chunks of ${size} bytes`);
      assert.deepEqual([got[0]!.toString(), got[2]!.toString()], ["a", "b"]);
    }
  });

  it("lets a consumer scan lines where they are first, as text and the same bytes, whatever the chunking", () => {
    // Lines starting with "T" are taken by the scan; the others reach onLine. Both in order.
    const lines: string[] = [];
    for (let i = 0; i < 1500; i++)
      lines.push(i % 9 === 0 ? "" : `${i % 2 ? "T" : "o"}${i} é ✓${i % 4 === 0 ? "\r" : ""}`);
    const data = Buffer.from(lines.join("\n") + "\n");
    const expected = lines
      .filter((l) => l.length > 0)
      .map((l) => `${l.startsWith("T") ? "scan" : "line"} ${l.endsWith("\r") ? l.slice(0, -1) : l}`);
    for (const size of [1, 2, 3, 17, 1000, 65536]) {
      const got: string[] = [];
      const splitter = new LineSplitter(
        1e7,
        (chunk, start, end) => got.push(`line ${chunk.toString("utf8", start, end)}`),
        () => assert.fail("no line is over the limit"),
        (text, bytes, from) => {
          assert.equal(Buffer.from(bytes).toString("latin1"), text);
          assert.equal(text.at(-1), "\n");
          if (text[from] !== "T") return -1;
          const nl = text.indexOf("\n", from);
          const end = text[nl - 1] === "\r" ? nl - 1 : nl;
          got.push(`scan ${Buffer.from(bytes.subarray(from, end)).toString("utf8")}`);
          return nl + 1;
        },
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
