import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AnswerScanner } from "../src/runtime/agent-answer.js";
import { idKey, isObject, type JsonRpcId } from "../src/protocol.js";
import { checkMutations, checkUtf8, parsedBytes, recognisedIn, TEXT_PIECES } from "./support/recogniser.js";
import { Rng } from "./support/fuzz-gen.js";

const scanner = new AnswerScanner();

const answer = (id: JsonRpcId, result: unknown) => JSON.stringify({ jsonrpc: "2.0", id, result });

const scannedKey = (bytes: Buffer) => recognisedIn(scanner, bytes);
const scanned = (line: string | Buffer) => scannedKey(Buffer.from(line));

/**
 * What decoding and JSON.parse say the line is: the id key of a successful response with exactly
 * the keys `jsonrpc`, `id` and `result`, or undefined.
 */
function parsedKey(bytes: Buffer): string | undefined {
  const m = parsedBytes(bytes);
  if (!isObject(m) || Object.keys(m).join() !== "jsonrpc,id,result" || m.jsonrpc !== "2.0") return undefined;
  return typeof m.id === "number" || typeof m.id === "string" ? idKey(m.id) : undefined;
}

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
      // Results that are no JSON, or not all of it:
      ...[
        '"end\\xturn"', // invalid escape
        '"end\\u12"',
        '"end\\u12g4"',
        '"end\tturn"', // raw control character
        "'end_turn'",
        "01",
        "1.",
        "1e",
        "-",
        "+1",
        "tru",
        "nul",
        "[1,]",
        "{}}",
        '{"a"}',
        '{"a":1,}',
        "NaN",
      ].map((result) => line.replace('"end_turn"', result)),
      answer(1, JSON.parse("[".repeat(70) + "]".repeat(70)) as unknown), // deeper than the scan goes
    ];
    for (const other of others) assert.equal(scanned(other), undefined, other);
  });

  it("leaves text that is not well-formed UTF-8 to decoding, which replaces it", () => {
    const [head, tail] = answer(1, "@").split("@") as [string, string];
    checkUtf8(scannedKey, head, tail, "n:1");
  });

  it("agrees with decoding and JSON.parse on generated answers and their byte-level mutations", () => {
    // Whenever the scanner accepts bytes, they must be valid UTF-8 (decoding and encoding them again
    // gives the same bytes: they can go into the log as they are), hold no CR, and JSON.parse of
    // them must be a successful response with the same id. Canonical serializations with a plain
    // id must be accepted. 20,000 answers, each with a handful of mutations.
    const rng = new Rng(23);
    const next = () => rng.next();
    const pick = <T>(items: readonly T[]): T => rng.pick(items);
    const generate = (depth: number): unknown => {
      const r = next();
      if (depth > 3 || r < 0.3) {
        if (r < 0.1) return pick(NUMBERS);
        if (r < 0.15) return pick([true, false, null]);
        let text = "";
        for (let i = Math.floor(next() * 6); i > 0; i--) text += pick(TEXT_PIECES);
        return text;
      }
      const items = Array.from({ length: Math.floor(next() * 4) }, () => generate(depth + 1));
      if (r < 0.5) return items;
      return Object.fromEntries(items.map((item, i) => [i % 2 ? `k${i}` : pick(TEXT_PIECES), item]));
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
      mutatedAccepted += checkMutations(canonical, rng, BAD_BYTES, scannedKey, parsedKey);
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
