import assert from "node:assert/strict";
import type { Rng } from "./fuzz-gen.js";

// For the tests of the recognisers that take agent lines on their bytes (`content-chunk.ts`,
// `agent-answer.ts`), which are checked against decoding and JSON.parse.

/** A recogniser: what it finds in the line at `from` of a text of whole lines, and where that line ends. */
interface LineRecogniser<T> {
  match(text: string, from: number): T | undefined;
  readonly lineEnd: number;
  readonly next: number;
}

/**
 * What `recogniser` finds in a line's bytes, given as the byte string the line splitter makes:
 * followed by CRLF, so that all of them are the line (a CR at its end too); where it says the line
 * ends and the next begins is checked as well.
 */
export function recognisedIn<T>(recogniser: LineRecogniser<T>, bytes: Buffer): T | undefined {
  const line = bytes.toString("latin1");
  const found = recogniser.match(`${line}\r\n`, 0);
  if (found !== undefined)
    assert.deepEqual([recogniser.lineEnd, recogniser.next], [line.length, line.length + 2]);
  return found;
}

/** Pieces of JSON string values that serializers escape, or write as multi-byte characters. */
export const TEXT_PIECES = [
  "a",
  " ",
  '"',
  "\\",
  "/",
  "\n",
  "\r",
  "\t",
  "\u0000",
  "\u001f",
  "\u007f",
  "é",
  "✓",
  "\u2028",
  "\ufeff",
  "😀",
  "\ud800",
  "\udc00",
  "日本",
  "\\u0041",
  "}}}}",
  '","',
];

/** Byte sequences that are no well-formed UTF-8 (the ranges of the Unicode standard's table 3-7): a decoder replaces them. */
export const MALFORMED_UTF8: readonly number[][] = [
  [0x80],
  [0xbf],
  [0xc0, 0xaf],
  [0xc1, 0xbf],
  [0xc2],
  [0xc2, 0x41],
  [0xe0, 0x80, 0x80],
  [0xe0, 0x9f, 0xbf],
  [0xed, 0xa0, 0x80],
  [0xed, 0xbf, 0xbf],
  [0xef, 0xbf],
  [0xf0, 0x80, 0x80, 0x80],
  [0xf0, 0x8f, 0xbf, 0xbf],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf5, 0x80, 0x80, 0x80],
  [0xff],
  [0xf0, 0x9f, 0x98],
];

/** Well-formed UTF-8 characters at the edges of those ranges. */
export const WELL_FORMED_UTF8: readonly number[][] = [
  [0xc2, 0x80],
  [0xdf, 0xbf],
  [0xe0, 0xa0, 0x80],
  [0xed, 0x9f, 0xbf],
  [0xee, 0x80, 0x80],
  [0xf0, 0x90, 0x80, 0x80],
  [0xf4, 0x8f, 0xbf, 0xbf],
  [0xef, 0xbb, 0xbf],
];

/** The bytes decoded and parsed; undefined if they are no JSON. */
export function parsedBytes(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString("utf8")) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * `canonical` with one byte-level mutation at a random place: 1–3 of the `bad` bytes inserted, or
 * as many bytes deleted, or overwritten.
 */
export function mutated(canonical: Buffer, rng: Rng, bad: readonly number[]): Buffer {
  const at = rng.int(canonical.length + 1);
  const op = rng.next();
  const bytes = Array.from({ length: 1 + rng.int(3) }, () => rng.pick(bad));
  const head = canonical.subarray(0, at);
  if (op < 0.33) return Buffer.concat([head, Buffer.from(bytes), canonical.subarray(at)]);
  if (op < 0.66) return Buffer.concat([head, canonical.subarray(at + bytes.length)]);
  return Buffer.concat([head, Buffer.from(bytes), canonical.subarray(at + bytes.length)]);
}

/**
 * `recognise` takes nothing for a line with malformed UTF-8 between `head` and `tail`, and `found`
 * for one with a well-formed character there.
 */
export function checkUtf8(
  recognise: (line: Buffer) => unknown,
  head: string,
  tail: string,
  found: unknown,
): void {
  for (const [cases, expected] of [
    [MALFORMED_UTF8, undefined],
    [WELL_FORMED_UTF8, found],
  ] as const)
    for (const bytes of cases) {
      const line = Buffer.concat([Buffer.from(head), Buffer.from(bytes), Buffer.from(tail)]);
      assert.equal(recognise(line), expected, Buffer.from(bytes).toString("hex"));
    }
}

/**
 * `count` mutations of `canonical` (`mutated`): whatever `recognise` takes of them must be
 * well-formed UTF-8 without a CR (decoding and encoding it again gives the same bytes: it can go
 * into the log as it is) and mean what `parse` (decoding and JSON.parse) says. Returns how many it took.
 */
export function checkMutations<T>(
  canonical: Buffer,
  rng: Rng,
  bad: readonly number[],
  recognise: (line: Buffer) => T | undefined,
  parse: (line: Buffer) => T | undefined,
  count = 5,
): number {
  let taken = 0;
  for (let m = 0; m < count; m++) {
    const mutation = mutated(canonical, rng, bad);
    const got = recognise(mutation);
    if (got === undefined) continue;
    taken++;
    const hex = mutation.toString("hex");
    assert.ok(Buffer.from(mutation.toString("utf8")).equals(mutation), `not UTF-8: ${hex}`);
    assert.equal(mutation.includes(0x0d), false, hex);
    assert.equal(got, parse(mutation), hex);
  }
  return taken;
}
