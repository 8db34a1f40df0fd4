import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MAX_TEXT_CHUNK_LINE, textChunkSession } from "../src/runtime/content-chunk.js";

const chunk = (text: string, sessionUpdate = "agent_message_chunk", sessionId = "sess-1") =>
  JSON.stringify({
    jsonrpc: "2.0",
    method: "session/update",
    params: { sessionId, update: { sessionUpdate, content: { type: "text", text } } },
  });

/** What JSON.parse says the line is: the session id of a text chunk notification, or undefined. */
function parsedSession(line: string): string | undefined {
  let m: {
    id?: unknown;
    method?: unknown;
    params?: { sessionId?: unknown; update?: { sessionUpdate?: unknown; content?: { type?: unknown } } };
  };
  try {
    m = JSON.parse(line) as typeof m;
  } catch {
    return undefined;
  }
  const kind = m.params?.update?.sessionUpdate;
  const isChunk = ["agent_message_chunk", "agent_thought_chunk", "user_message_chunk"].includes(String(kind));
  return m.id === undefined &&
    m.method === "session/update" &&
    isChunk &&
    m.params?.update?.content?.type === "text"
    ? (m.params.sessionId as string)
    : undefined;
}

describe("text chunk recognition without JSON.parse", () => {
  it("recognises the SDKs' serialization of text chunks, whatever the text", () => {
    const texts = [
      "",
      "plain",
      'quote " and \\ backslash',
      "line\nbreak\ttab",
      "\u0001 control",
      "日本語 ✓ 🎉",
      "\ud800 lone",
    ];
    for (const kind of ["agent_message_chunk", "agent_thought_chunk", "user_message_chunk"]) {
      for (const text of texts)
        assert.equal(textChunkSession(chunk(text, kind, "s-42")), "s-42", `${kind} ${text}`);
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
      line.replace('"sessionId":"sess-1"', '"sessionId":"se\\"ss"'),
      line.replace(":", ": "), // whitespace
      line.slice(0, -1), // cut short
      line + " ",
      line.replace('"hi"', '"h\\xi"'), // invalid escape
      line.replace('"hi"', '"h\\u12"'),
      line.replace('"hi"', '"h\ni"'), // raw control character
      line.replace('"sessionId":"sess-1"', '"sessionId":""'),
    ];
    for (const other of others) assert.equal(textChunkSession(other), undefined, other);
  });

  it("fails in linear time on a long text followed by something unexpected", () => {
    // A run inside the text's repetition backtracked exponentially here: 28 characters took 1.5 s,
    // so these would never finish. Real agents add `_meta` next to the content of history chunks.
    const text = 'word "quoted" \\ '.repeat(3000).slice(0, MAX_TEXT_CHUNK_LINE - 300);
    const withMeta = JSON.stringify({
      jsonrpc: "2.0",
      method: "session/update",
      params: {
        sessionId: "s",
        update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text }, _meta: { x: 1 } },
      },
    });
    assert.ok(withMeta.length <= MAX_TEXT_CHUNK_LINE);
    assert.equal(textChunkSession(withMeta), undefined);
    assert.equal(textChunkSession(withMeta.slice(0, -2) + "}"), undefined);
    assert.equal(textChunkSession(chunk(text)), "sess-1");
  });

  it("leaves lines over the size limit to JSON.parse", () => {
    const long = chunk("x".repeat(MAX_TEXT_CHUNK_LINE));
    assert.equal(textChunkSession(long), undefined);
    assert.equal(parsedSession(long), "sess-1");
  });

  it("agrees with JSON.parse on every mutation of a chunk line it accepts", () => {
    // One-character edits of a real line (deletions, duplications, swaps with JSON punctuation):
    // whenever the pattern accepts the result, JSON.parse must read the same session id.
    const base = chunk('a "b" \\ c', "agent_thought_chunk", "abc");
    const alphabet = ['"', "\\", "{", "}", ",", ":", "u", "0", "n", " ", "\n"];
    let accepted = 0;
    for (let i = 0; i < base.length; i++) {
      const variants = [base.slice(0, i) + base.slice(i + 1), base.slice(0, i) + base[i] + base.slice(i)];
      for (const c of alphabet) variants.push(base.slice(0, i) + c + base.slice(i + 1));
      for (const line of variants) {
        const fast = textChunkSession(line);
        if (fast !== undefined) {
          accepted++;
          assert.equal(fast, parsedSession(line), line);
        }
      }
    }
    assert.ok(accepted > 0);
  });
});
