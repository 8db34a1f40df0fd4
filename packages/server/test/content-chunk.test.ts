import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MAX_TEXT_CHUNK_LINE, PATTERN_AFTER, TextChunkScanner } from "../src/runtime/content-chunk.js";
import { checkMutations, checkUtf8, parsedBytes, recognisedIn, TEXT_PIECES } from "./support/recogniser.js";
import { Rng } from "./support/fuzz-gen.js";

const KINDS = ["agent_message_chunk", "agent_thought_chunk", "user_message_chunk"];

const chunk = (text: string, sessionUpdate = "agent_message_chunk", sessionId = "sess-1") =>
  JSON.stringify({
    jsonrpc: "2.0",
    method: "session/update",
    params: { sessionId, update: { sessionUpdate, content: { type: "text", text } } },
  });

const scanner = new TextChunkScanner();

const textChunkSession = (bytes: Buffer) => recognisedIn(scanner, bytes);
const recognised = (line: string | Buffer) => textChunkSession(Buffer.from(line));

/**
 * What decoding and JSON.parse say the line is: the session id of a text chunk notification, or
 * undefined. Exact: any other key anywhere, or a value of another type, is another message.
 */
function parsedSession(bytes: Buffer): string | undefined {
  const m = parsedBytes(bytes);
  const keys = (o: unknown, ...expected: string[]) =>
    typeof o === "object" && o !== null && !Array.isArray(o) && Object.keys(o).join() === expected.join();
  const msg = m as { jsonrpc: unknown; method: unknown; params: Record<string, unknown> };
  if (!keys(msg, "jsonrpc", "method", "params") || msg.jsonrpc !== "2.0" || msg.method !== "session/update")
    return undefined;
  const params = msg.params as { sessionId: unknown; update: Record<string, unknown> };
  if (!keys(params, "sessionId", "update") || typeof params.sessionId !== "string") return undefined;
  const update = params.update as { sessionUpdate: unknown; content: Record<string, unknown> };
  if (!keys(update, "sessionUpdate", "content") || !KINDS.includes(update.sessionUpdate as string))
    return undefined;
  if (!keys(update.content, "type", "text") || update.content.type !== "text") return undefined;
  return typeof update.content.text === "string" ? params.sessionId : undefined;
}

/** Bytes that break things: UTF-8 lead and continuation bytes in bad places, JSON punctuation, whitespace. */
const BAD_BYTES = [
  0x80, 0xbf, 0xc0, 0xc1, 0xc2, 0xe0, 0xed, 0xa0, 0xf0, 0xf4, 0x90, 0xf5, 0xff, 0x22, 0x5c, 0x7b, 0x7d, 0x2c,
  0x3a, 0x20, 0x0d, 0x09, 0x00, 0x75, 0x30,
];

describe("text chunk recognition on the agent's bytes", () => {
  it("recognises the SDKs' serialization of text chunks, whatever the text", () => {
    const texts = [
      "",
      "plain",
      'quote " and \\ backslash',
      "line\nbreak\ttab",
      "\u0001 control",
      "日本語 ✓ 🎉",
      "\ud800 lone",
      "x".repeat(MAX_TEXT_CHUNK_LINE - 200),
    ];
    for (const kind of KINDS)
      for (const text of texts)
        assert.equal(recognised(chunk(text, kind, "s-42")), "s-42", `${kind} ${text.slice(0, 40)}`);
  });

  it("returns the session id as a string of its own, the same one for a run of one session", () => {
    const first = recognised(chunk("a", KINDS[0], "run-1"));
    assert.equal(first, "run-1");
    assert.equal(recognised(chunk("b", KINDS[1], "run-1")), first);
    assert.equal(recognised(chunk("c", KINDS[0], "run-2")), "run-2");
    assert.equal(recognised(chunk("d", KINDS[0], "run-")), "run-");
    assert.equal(recognised(chunk("e", KINDS[0], "run-1")), "run-1");
    // The previous id followed by a quote further along the line (here a key's value) is not the id.
    assert.equal(recognised(chunk("f", KINDS[0], "agent_message_chunk")), "agent_message_chunk");
    assert.equal(recognised(chunk("g", KINDS[0], "s")), "s");
    assert.equal(recognised(chunk("h", KINDS[0], "text")), "text");
    assert.equal(recognised(chunk('"text"', KINDS[0], "tex")), "tex");
  });

  it("gives a session its own pattern and still tells sessions and other lines apart", () => {
    const own = new TextChunkScanner();
    const session = (line: string) => recognisedIn(own, Buffer.from(line));
    const ids = ["long-a", "long-b", "long-", "long-ab"];
    // Past PATTERN_AFTER chunks each, the first two have their own pattern, tried first.
    for (let i = 0; i < PATTERN_AFTER + 3; i++)
      assert.equal(session(chunk(`a${i}`, KINDS[i % 3], "long-a")), "long-a");
    for (let i = 0; i < PATTERN_AFTER + 3; i++)
      assert.equal(session(chunk(`b${i}`, KINDS[i % 3], "long-b")), "long-b");
    for (let i = 0; i < 200; i++) {
      const id = ids[(i * 7) % ids.length]!;
      assert.equal(session(chunk(`t${i} é ✓`, KINDS[i % 3], id)), id, `chunk ${i} of ${id}`);
      // A line that is no text chunk, right after each, whichever pattern is tried first.
      assert.equal(session(chunk(`t${i}`, "tool_call_update", id)), undefined);
      assert.equal(session(chunk(`t${i}`, KINDS[0], id).replace('"text":"t', '"text": "t')), undefined);
    }
  });

  it("leaves every other line to JSON.parse", () => {
    const line = chunk("hi");
    const others = [
      line.replace('{"jsonrpc"', '{"id":1,"jsonrpc"'), // a request
      line.replace("}}}}", '}}},"id":1}'),
      line.replace('"text":"hi"', '"text":"hi","extra":1'),
      line.replace('"type":"text"', '"type":"image"'),
      line.replace("agent_message_chunk", "tool_call_update"),
      line.replace("agent_message_chunk", "agent_message_chun"),
      line.replace('"sessionId":"sess-1"', '"sessionId":"se\\"ss"'), // escapes in the id
      line.replace('"sessionId":"sess-1"', '"sessionId":"séss"'), // not ASCII: decoded, then parsed
      line.replace('"sessionId":"sess-1"', '"sessionId":""'),
      line.replace(":", ": "), // whitespace
      line.slice(0, -1), // cut short
      line + " ",
      line + "\r",
      line.replace('"hi"', '"h\\xi"'), // invalid escape
      line.replace('"hi"', '"h\\u12"'),
      line.replace('"hi"', '"h\\u12g4"'),
      line.replace('"hi"', '"h\\'),
      line.replace('"hi"', '"h\ni"'), // raw control character
      line.replace('"hi"', '"h\ri"'),
      line.replace('"hi"', '"hi'),
    ];
    for (const other of others) assert.equal(recognised(other), undefined, other);
  });

  it("leaves text that is not well-formed UTF-8 to decoding, which replaces it", () => {
    const [head, tail] = chunk("@").split("@") as [string, string];
    checkUtf8(textChunkSession, head, tail, "sess-1");
  });

  it("agrees with decoding and JSON.parse on generated messages and their byte-level mutations", () => {
    // Whenever the recogniser accepts bytes, they must be valid UTF-8 (decoding and encoding them
    // again gives the same bytes: they can go into the log as they are) and JSON.parse of them
    // must be a text chunk of the same session. Canonical serializations with a plain id must be
    // accepted. 20,000 messages, each with a handful of mutations.
    const rng = new Rng(17);
    const next = () => rng.next();
    const pick = <T>(items: readonly T[]): T => rng.pick(items);
    let accepted = 0;
    let mutatedAccepted = 0;
    for (let n = 0; n < 20_000; n++) {
      let text = "";
      for (let i = Math.floor(next() * 12); i > 0; i--) text += pick(TEXT_PIECES);
      const plainId = next() < 0.8;
      const id = plainId
        ? `s${Math.floor(next() * 1000)}-${"x".repeat(Math.floor(next() * 40))}`
        : pick(['a"b', "a\\b", "é", "a\tb", "😀"]);
      const canonical = Buffer.from(chunk(text, pick(KINDS), id));
      const fast = textChunkSession(canonical);
      if (plainId) {
        assert.equal(fast, id, canonical.toString());
        accepted++;
      } else assert.ok(fast === undefined || fast === parsedSession(canonical), canonical.toString());
      mutatedAccepted += checkMutations(canonical, rng, BAD_BYTES, textChunkSession, parsedSession);
    }
    assert.ok(accepted > 10_000 && mutatedAccepted > 1000, `${accepted} / ${mutatedAccepted}`);
  });

  it("takes linear time on a long text followed by something unexpected", () => {
    // A run inside the text's repetition backtracked exponentially here: 28 characters took 1.5 s,
    // so these would never finish. Real agents add `_meta` next to the content of history chunks.
    const text = 'word "quoted" \\ é ✓ 😀 '.repeat(3000).slice(0, MAX_TEXT_CHUNK_LINE / 4);
    const withMeta = JSON.stringify({
      jsonrpc: "2.0",
      method: "session/update",
      params: {
        sessionId: "s",
        update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text }, _meta: { x: 1 } },
      },
    });
    assert.ok(Buffer.byteLength(withMeta) <= MAX_TEXT_CHUNK_LINE);
    assert.equal(recognised(withMeta), undefined);
    assert.equal(recognised(withMeta.slice(0, -2) + "}"), undefined);
    assert.equal(recognised(chunk(text)), "sess-1");
  });

  it("scans a text of many lines where they are: sessions that alternate, ids with pattern characters, CRLF, other lines", () => {
    // Two sessions stream long enough to get a pattern of their own, each interleaved with others
    // whose ids that pattern must not match if its characters were not escaped ("a.c" / "abc").
    const long = ["a.c", "(a)|[b]{2}^$*?/-"];
    const others = ["abc", "a+c", "aac", "a", "a.c2", "(a)|[b]{2}^$*?/", "(a)|[b]{2}^$*?/--", "xbbx"];
    const other = '{"jsonrpc":"2.0","id":1,"result":{}}';
    const expected: Array<[string | undefined, string]> = [];
    let text = "";
    for (let i = 0; i < 6000; i++) {
      const id = i % 4 === 3 ? others[(i >> 2) % others.length]! : long[i < 3000 ? 0 : 1]!;
      const line = chunk(`t${i} é "q"`, KINDS[i % 3], id);
      text += `${line}${i % 5 === 0 ? "\r\n" : "\n"}`;
      expected.push([id, line]);
      if (i % 97 === 0) {
        text += `${other}\n\n`;
        expected.push([undefined, other], [undefined, ""]);
      }
    }
    const scanner = new TextChunkScanner();
    const bytes = Buffer.from(text, "utf8").toString("latin1");
    const got: Array<[string | undefined, string]> = [];
    for (let from = 0; from < bytes.length;) {
      const session = scanner.match(bytes, from);
      if (session !== undefined) {
        got.push([session, bytes.slice(from, scanner.lineEnd)]);
        from = scanner.next;
      } else {
        const nl = bytes.indexOf("\n", from);
        got.push([undefined, bytes.slice(from, nl)]);
        from = nl + 1;
      }
    }
    const decoded = got.map(([id, line]): [string | undefined, string] => [
      id,
      Buffer.from(line, "latin1").toString("utf8"),
    ]);
    assert.deepEqual(decoded, expected);
  });

  it("keeps recognising every session past its cache of session patterns", () => {
    const scanner = new TextChunkScanner();
    for (let round = 0; round < 3; round++)
      for (let i = 0; i < 100; i++) {
        const line = `${chunk(`r${round}`, "agent_message_chunk", `s-${i}`)}\n`;
        assert.equal(scanner.match(`x\n${line}`, 2), `s-${i}`);
        assert.equal(scanner.next, line.length + 2);
      }
  });

  it("leaves lines over the size limit to JSON.parse", () => {
    const long = Buffer.from(chunk("x".repeat(MAX_TEXT_CHUNK_LINE)));
    assert.equal(textChunkSession(long), undefined);
    assert.equal(parsedSession(long), "sess-1");
  });
});
