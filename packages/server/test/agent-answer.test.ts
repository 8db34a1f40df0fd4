import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AnswerScanner } from "../src/runtime/agent-answer.js";
import { idKey, isObject, type JsonRpcId } from "../src/protocol.js";

const scanner = new AnswerScanner();

const answer = (id: JsonRpcId, result: unknown) => JSON.stringify({ jsonrpc: "2.0", id, result });

/**
 * The scanner on a line's bytes, given as the byte string the line splitter makes: followed by
 * CRLF, so that all of them are the line; where it says the line ends and the next begins is
 * checked as well.
 */
function scannedKey(bytes: Buffer): string | undefined {
  const line = bytes.toString("latin1");
  const key = scanner.match(`${line}\r\n`, 0);
  if (key !== undefined) assert.deepEqual([scanner.lineEnd, scanner.next], [line.length, line.length + 2]);
  return key;
}
const scanned = (line: string | Buffer) => scannedKey(Buffer.from(line));

/**
 * What decoding and JSON.parse say the line is: the id key of a successful response with exactly
 * the keys `jsonrpc`, `id` and `result`, or undefined.
 */
function parsedKey(bytes: Buffer): string | undefined {
  let m: unknown;
  try {
    m = JSON.parse(bytes.toString("utf8"));
  } catch {
    return undefined;
  }
  if (!isObject(m) || Object.keys(m).join() !== "jsonrpc,id,result" || m.jsonrpc !== "2.0") return undefined;
  return typeof m.id === "number" || typeof m.id === "string" ? idKey(m.id) : undefined;
}

/** A deterministic generator (mulberry32), so a failure names a reproducible case. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const STRING_PIECES = [
  "a",
  " ",
  '"',
  "\\",
  "/",
  "\n",
  "\r",
  "\t",
  "\u0000",
  "\u007f",
  "é",
  "✓",
  "\u2028",
  "😀",
  "\ud800",
  "}",
  ",",
];
const NUMBERS = [0, -0, 1, -1, 1.5, -2.25e-7, 1e21, 123456789012, Number.MAX_SAFE_INTEGER, 5e-324];
/** Bytes that break things: UTF-8 lead and continuation bytes in bad places, JSON punctuation, whitespace. */
const BAD_BYTES = [
  0x80, 0xbf, 0xc0, 0xc2, 0xe0, 0xed, 0xa0, 0xf0, 0xf4, 0x90, 0xf5, 0xff, 0x22, 0x5c, 0x7b, 0x7d, 0x5b, 0x5d,
  0x2c, 0x3a, 0x20, 0x0d, 0x09, 0x00, 0x75, 0x30, 0x2d, 0x2e, 0x65, 0x6e,
];

describe("answer recognition on the agent's bytes", () => {
  it("recognises the SDKs' serialization of a successful response, with its id key", () => {
    assert.equal(scanned(answer(7, { stopReason: "end_turn" })), "n:7");
    assert.equal(scanned(answer(0, null)), "n:0");
    assert.equal(scanned(answer(-12, {})), "n:-12");
    assert.equal(scanned(answer(999_999_999_999_999, [])), "n:999999999999999");
    assert.equal(scanned(answer("abc-1", { stopReason: "end_turn" })), "s:abc-1");
    assert.equal(scanned(answer("", "x")), "s:");
    assert.equal(scanned(answer("7", true)), "s:7");
    const results = [
      { stopReason: "end_turn", _meta: { usage: { input: 12, output: -3.5e-2 } } },
      { a: [1, [2, [3, {}]], "é ✓ 😀", '\\"/\b\f\n\r\t\u0001\ud800'], b: false, c: null, d: true },
      [],
      "",
      12.5e300,
    ];
    for (const result of results) assert.equal(scanned(answer(3, result)), "n:3", JSON.stringify(result));
  });

  it("leaves every other line to JSON.parse", () => {
    const line = answer(7, { stopReason: "end_turn" });
    const others = [
      JSON.stringify({ jsonrpc: "2.0", result: { stopReason: "end_turn" }, id: 7 }), // another key order
      JSON.stringify({ jsonrpc: "2.0", id: 7, error: { code: -32603, message: "no" } }),
      JSON.stringify({ jsonrpc: "2.0", id: 7, method: "fs/read_text_file", params: {} }), // an agent request
      JSON.stringify({ jsonrpc: "2.0", method: "session/update", params: {} }),
      line.replace("}}", '},"id":8}'), // a second id: JSON.parse takes the last
      line.replace("}}", '},"extra":1}'),
      line.replace('"id":7', '"id":"a\\"b"'), // an escape in the id
      line.replace('"id":7', '"id":"é"'),
      line.replace('"id":7', '"id":-0'),
      line.replace('"id":7', '"id":07'),
      line.replace('"id":7', '"id":7.0'),
      line.replace('"id":7', '"id":1e3'),
      line.replace('"id":7', '"id":1234567890123456'), // past 15 digits
      line.replace('"id":7', '"id":null'),
      line.replace('"id":7', '"id":true'),
      line.replace(":", ": "), // whitespace
      line.replace('{"stopReason"', '{ "stopReason"'),
      line.replace("{", "{\r"),
      line.slice(0, -1), // cut short
      line + " ",
      line + "\r",
      line + "}",
      line.replace('"end_turn"', '"end\\xturn"'), // invalid escape
      line.replace('"end_turn"', '"end\\u12"'),
      line.replace('"end_turn"', '"end\\u12g4"'),
      line.replace('"end_turn"', '"end\tturn"'), // raw control character
      line.replace('"end_turn"', "'end_turn'"),
      line.replace('"end_turn"', "01"),
      line.replace('"end_turn"', "1."),
      line.replace('"end_turn"', "1e"),
      line.replace('"end_turn"', "-"),
      line.replace('"end_turn"', "+1"),
      line.replace('"end_turn"', "tru"),
      line.replace('"end_turn"', "nul"),
      line.replace('"end_turn"', "[1,]"),
      line.replace('"end_turn"', "{}}"),
      line.replace('"end_turn"', '{"a"}'),
      line.replace('"end_turn"', '{"a":1,}'),
      line.replace('"end_turn"', "NaN"),
      answer(1, JSON.parse("[".repeat(70) + "]".repeat(70)) as unknown), // deeper than the scan goes
    ];
    for (const other of others) assert.equal(scanned(other), undefined, other);
  });

  it("leaves text that is not well-formed UTF-8 to decoding, which replaces it", () => {
    const [head, tail] = answer(1, "@").split("@") as [string, string];
    const invalid = [
      [0x80],
      [0xc0, 0xaf],
      [0xc1, 0xbf],
      [0xc2],
      [0xc2, 0x41],
      [0xe0, 0x9f, 0xbf],
      [0xed, 0xa0, 0x80],
      [0xef, 0xbf],
      [0xf0, 0x8f, 0xbf, 0xbf],
      [0xf4, 0x90, 0x80, 0x80],
      [0xf5, 0x80, 0x80, 0x80],
      [0xff],
    ];
    for (const bytes of invalid) {
      const line = Buffer.concat([Buffer.from(head), Buffer.from(bytes), Buffer.from(tail)]);
      assert.equal(scannedKey(line), undefined, Buffer.from(bytes).toString("hex"));
    }
    const valid = [
      [0xc2, 0x80],
      [0xdf, 0xbf],
      [0xe0, 0xa0, 0x80],
      [0xed, 0x9f, 0xbf],
      [0xf0, 0x90, 0x80, 0x80],
      [0xf4, 0x8f, 0xbf, 0xbf],
    ];
    for (const bytes of valid) {
      const line = Buffer.concat([Buffer.from(head), Buffer.from(bytes), Buffer.from(tail)]);
      assert.equal(scannedKey(line), "n:1", Buffer.from(bytes).toString("hex"));
    }
  });

  it("agrees with decoding and JSON.parse on generated answers and their byte-level mutations", () => {
    // Whenever the scanner accepts bytes, they must be valid UTF-8 (decoding and encoding them again
    // gives the same bytes: they can go into the log as they are), hold no CR, and JSON.parse of
    // them must be a successful response with the same id. Canonical serializations with a plain
    // id must be accepted. 20,000 answers, each with a handful of mutations.
    const next = random(23);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
    const generate = (depth: number): unknown => {
      const r = next();
      if (depth > 3 || r < 0.3) {
        if (r < 0.1) return pick(NUMBERS);
        if (r < 0.15) return pick([true, false, null]);
        let text = "";
        for (let i = Math.floor(next() * 6); i > 0; i--) text += pick(STRING_PIECES);
        return text;
      }
      const items = Array.from({ length: Math.floor(next() * 4) }, () => generate(depth + 1));
      if (r < 0.5) return items;
      return Object.fromEntries(items.map((item, i) => [i % 2 ? `k${i}` : pick(STRING_PIECES), item]));
    };
    let accepted = 0;
    let mutatedAccepted = 0;
    for (let n = 0; n < 20_000; n++) {
      const plainId = next() < 0.8;
      const id: JsonRpcId = plainId
        ? next() < 0.5
          ? Math.floor((next() - 0.3) * 10 ** Math.floor(next() * 15))
          : `req-${Math.floor(next() * 1000)}`
        : pick(['a"b', "a\\b", "é", "a\tb", 1.5, 2 ** 60]);
      const canonical = Buffer.from(answer(id, generate(0)));
      const fast = scannedKey(canonical);
      if (plainId) {
        assert.equal(fast, idKey(id), canonical.toString());
        accepted++;
      } else assert.ok(fast === undefined || fast === parsedKey(canonical), canonical.toString());
      for (let m = 0; m < 5; m++) {
        const at = Math.floor(next() * (canonical.length + 1));
        const op = next();
        const bytes = Array.from({ length: 1 + Math.floor(next() * 3) }, () => pick(BAD_BYTES));
        const mutated =
          op < 0.33
            ? Buffer.concat([canonical.subarray(0, at), Buffer.from(bytes), canonical.subarray(at)]) // insert
            : op < 0.66
              ? Buffer.concat([canonical.subarray(0, at), canonical.subarray(at + bytes.length)]) // delete
              : Buffer.concat([
                  canonical.subarray(0, at),
                  Buffer.from(bytes),
                  canonical.subarray(at + bytes.length),
                ]);
        const got = scannedKey(mutated);
        if (got === undefined) continue;
        mutatedAccepted++;
        assert.ok(
          Buffer.from(mutated.toString("utf8")).equals(mutated),
          `not UTF-8: ${mutated.toString("hex")}`,
        );
        assert.equal(mutated.includes(0x0d), false, mutated.toString("hex"));
        assert.equal(got, parsedKey(mutated), mutated.toString("hex"));
      }
    }
    assert.ok(accepted > 10_000 && mutatedAccepted > 1000, `${accepted} / ${mutatedAccepted}`);
  });

  it("finds the answer at its offset in a text of several lines, and leaves the lines around it", () => {
    const before = JSON.stringify({ jsonrpc: "2.0", method: "session/update", params: {} });
    const line = answer("r-1", { stopReason: "end_turn" });
    const text = `${before}\n${line}\n${before}\n`;
    assert.equal(scanner.match(text, 0), undefined);
    const from = before.length + 1;
    assert.equal(scanner.match(text, from), "s:r-1");
    assert.deepEqual([scanner.lineEnd, scanner.next], [from + line.length, from + line.length + 1]);
    assert.equal(scanner.match(text, scanner.next), undefined);
  });
});
