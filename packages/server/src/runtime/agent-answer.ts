/**
 * The agent's answer to a client request, recognised on its bytes: after the text chunks
 * (`content-chunk.ts`), the one line of every turn that was still decoded, parsed (`JSON.parse`)
 * and routed as an object is the response that ends it (`session/prompt`'s `end_turn`), though the
 * server only needs its id: the line goes into the event log as the agent wrote it either way. So
 * a response in the form the ACP SDKs write it, `{"jsonrpc":"2.0","id":ID,"result":VALUE}` on one
 * line, is recognised by scanning its bytes (a line of the line splitter's byte string, one
 * character per byte): its id is read, and its result is checked to be JSON in UTF-8 without
 * building anything. The connection then looks the id up among its requests in flight and, for one
 * whose answer nothing needs to read (`Connection.scanAnswer`), appends the line's bytes as they are.
 *
 * The form is a strict subset of the JSON grammar and of UTF-8, so that a line it accepts is one
 * `JSON.parse` would accept, means what the scan says (no duplicate or other top-level keys, no
 * `error`, no `method`), and has the bytes that decoding and encoding it again would give: no
 * whitespace anywhere (JSON.stringify writes none; a CR would have to be taken out), the id a
 * number written canonically (an integer of up to 15 digits, no `-0`, so `n:${Number(text)}` is
 * `n:${text}`) or a string of printable ASCII without `"` or `\`, strings with their escapes checked
 * and no control characters, multi-byte characters well-formed (the ranges of the Unicode
 * standard's table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF), nesting at most
 * `MAX_DEPTH` deep. Anything else — another key order, an error response, spaces, an escape in the
 * id, text a decoder would repair — is left to the parse path (`onAgentLine`), as before.
 *
 * The result is checked by the JSON scan the request bodies share (`json-scan.ts`, `jsonEnd`).
 */

import { jsonEnd } from "./json-scan.js";

/** Where a response's id starts. */
const HEAD = '{"jsonrpc":"2.0","id":';
/** What follows the id. */
const RESULT = ',"result":';
/** Deeper results are left to JSON.parse. */
const MAX_DEPTH = 64;
/** Digits of an integer id that a double holds exactly and prints the same (2^53 has 16). */
const MAX_ID_DIGITS = 15;

/**
 * Recognises responses in canonical form at an offset of the text of whole lines (each ending in
 * `\n`) the line splitter hands over. One per connection; `match` sets `lineEnd` and `next`.
 */
export class AnswerScanner {
  /** After a match: the end of the line's bytes (before its break) and the start of the next line. */
  lineEnd = 0;
  next = 0;

  /**
   * The id key (`idKey`: `n:123`, `s:abc`) of the response in canonical form that starts at `from`
   * of `text`, and `lineEnd`/`next` set; `undefined` for any other line. `bytes` are the same as
   * `text` (the line splitter hands over both), where the result is scanned.
   */
  match(text: string, from: number, bytes: Uint8Array = Buffer.from(text, "latin1")): string | undefined {
    if (!text.startsWith(HEAD, from)) return undefined;
    const at = from + HEAD.length;
    const end = text.charCodeAt(at) === 34 ? stringId(text, at) : numberId(text, at);
    if (end === -1 || !text.startsWith(RESULT, end)) return undefined;
    const valueEnd = jsonEnd(bytes, end + RESULT.length, bytes.length, MAX_DEPTH, false);
    if (valueEnd === -1 || text.charCodeAt(valueEnd) !== 125) return undefined;
    const lineEnd = valueEnd + 1;
    const c = text.charCodeAt(lineEnd);
    if (c !== 10 && (c !== 13 || text.charCodeAt(lineEnd + 1) !== 10)) return undefined;
    this.lineEnd = lineEnd;
    this.next = c === 10 ? lineEnd + 1 : lineEnd + 2;
    return text.charCodeAt(at) === 34 ? `s:${text.slice(at + 1, end - 1)}` : `n:${text.slice(at, end)}`;
  }
}

/** The end of a string id of printable ASCII without `"` or `\` at `at` (its opening quote), or -1. */
function stringId(text: string, at: number): number {
  for (let i = at + 1; ; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) return i + 1;
    if (c < 0x20 || c > 0x7e || c === 92) return -1;
  }
}

/** The end of an integer id written as JSON.stringify writes it (`-?[1-9][0-9]{0,14}` or `0`) at `at`, or -1. */
function numberId(text: string, at: number): number {
  let i = text.charCodeAt(at) === 45 ? at + 1 : at;
  const first = text.charCodeAt(i);
  if (first === 48) return i === at ? at + 1 : -1; // `0`, not `-0`
  if (first < 49 || first > 57) return -1;
  const start = i;
  while (++i - start <= MAX_ID_DIGITS) {
    const c = text.charCodeAt(i);
    if (c < 48 || c > 57) return i;
  }
  return -1;
}
