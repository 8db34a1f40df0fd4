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
 */

/** Where a response's id starts. */
const HEAD = '{"jsonrpc":"2.0","id":';
/** What follows the id. */
const RESULT = ',"result":';
/** Deeper results are left to JSON.parse (the scan recurses per level). */
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
   * of `text`, and `lineEnd`/`next` set; `undefined` for any other line.
   */
  match(text: string, from: number): string | undefined {
    if (!text.startsWith(HEAD, from)) return undefined;
    const at = from + HEAD.length;
    const end = text.charCodeAt(at) === 34 ? stringId(text, at) : numberId(text, at);
    if (end === -1 || !text.startsWith(RESULT, end)) return undefined;
    const valueEnd = value(text, end + RESULT.length, 0);
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

/** The end of the JSON value at `at` (no whitespace, nesting within `MAX_DEPTH`), or -1. */
function value(text: string, at: number, depth: number): number {
  const c = text.charCodeAt(at);
  if (c === 34) return string(text, at + 1);
  if (c === 123) return object(text, at + 1, depth + 1);
  if (c === 91) return array(text, at + 1, depth + 1);
  if (c === 45 || (c >= 48 && c <= 57)) return number(text, at);
  if (c === 116) return text.startsWith("true", at) ? at + 4 : -1;
  if (c === 102) return text.startsWith("false", at) ? at + 5 : -1;
  if (c === 110) return text.startsWith("null", at) ? at + 4 : -1;
  return -1;
}

/** After an object's `{` at `at - 1`: the end of the object, or -1. */
function object(text: string, at: number, depth: number): number {
  if (depth > MAX_DEPTH) return -1;
  if (text.charCodeAt(at) === 125) return at + 1;
  for (let i = at; ; i++) {
    if (text.charCodeAt(i) !== 34) return -1;
    i = string(text, i + 1);
    if (i === -1 || text.charCodeAt(i) !== 58) return -1;
    i = value(text, i + 1, depth);
    if (i === -1) return -1;
    const c = text.charCodeAt(i);
    if (c === 125) return i + 1;
    if (c !== 44) return -1;
  }
}

/** After an array's `[` at `at - 1`: the end of the array, or -1. */
function array(text: string, at: number, depth: number): number {
  if (depth > MAX_DEPTH) return -1;
  if (text.charCodeAt(at) === 93) return at + 1;
  for (let i = at; ; i++) {
    i = value(text, i, depth);
    if (i === -1) return -1;
    const c = text.charCodeAt(i);
    if (c === 93) return i + 1;
    if (c !== 44) return -1;
  }
}

/**
 * After a string's opening quote at `at - 1`: the end of the string, or -1. The text is whole
 * lines, so a string that does not end on its line meets the line's `\n` (a control character).
 */
function string(text: string, at: number): number {
  for (let i = at; ;) {
    const c = text.charCodeAt(i);
    if (c === 34) return i + 1;
    if (c < 0x20) return -1;
    if (c < 0x80) {
      if (c !== 92) i++;
      else if (!(i = escape(text, i + 1))) return -1;
    } else if ((i = utf8(text, i, c)) === -1) return -1;
  }
}

/** After a `\` at `at - 1`: the end of the escape, or 0 (not -1: see `string`) if it is none. */
function escape(text: string, at: number): number {
  const c = text.charCodeAt(at);
  // " \ / b f n r t
  if (c === 34 || c === 92 || c === 47 || c === 98 || c === 102 || c === 110 || c === 114 || c === 116)
    return at + 1;
  if (c !== 117) return 0;
  for (let i = at + 1; i < at + 5; i++) {
    const h = text.charCodeAt(i) | 0x20; // lower case for letters
    if (!((h >= 48 && h <= 57) || (h >= 97 && h <= 102))) return 0;
  }
  return at + 5;
}

/** The end of the well-formed UTF-8 character whose first byte `c` is at `at`, or -1. */
function utf8(text: string, at: number, c: number): number {
  let n: number;
  let lo = 0x80;
  let hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) n = 1;
  else if (c >= 0xe0 && c <= 0xef) {
    n = 2;
    if (c === 0xe0) lo = 0xa0;
    else if (c === 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 3;
    if (c === 0xf0) lo = 0x90;
    else if (c === 0xf4) hi = 0x8f;
  } else return -1;
  const second = text.charCodeAt(at + 1);
  if (second < lo || second > hi) return -1;
  for (let i = at + 2; i <= at + n; i++) {
    const b = text.charCodeAt(i);
    if (b < 0x80 || b > 0xbf) return -1;
  }
  return at + n + 1;
}

/** The end of a JSON number at `at` (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`), or -1. */
function number(text: string, at: number): number {
  let i = text.charCodeAt(at) === 45 ? at + 1 : at;
  if (text.charCodeAt(i) === 48) i++;
  else if ((i = digits(text, i)) === -1) return -1;
  if (text.charCodeAt(i) === 46 && (i = digits(text, i + 1)) === -1) return -1;
  const e = text.charCodeAt(i);
  if (e === 101 || e === 69) {
    const sign = text.charCodeAt(i + 1);
    i = digits(text, sign === 43 || sign === 45 ? i + 2 : i + 1);
  }
  return i;
}

/** The end of one or more digits at `at`, or -1. */
function digits(text: string, at: number): number {
  let i = at;
  for (let c = text.charCodeAt(i); c >= 48 && c <= 57; c = text.charCodeAt(++i));
  return i === at ? -1 : i;
}
