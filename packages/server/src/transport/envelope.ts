import { isUtf8 } from "node:buffer";
import { MAX_JSON_DEPTH } from "../http/json.js";
import type { JsonRpcId } from "../protocol.js";
import { MAX_STRING_ID_LENGTH, parseMessage, type ParsedMessage } from "./parse-message.js";

/** What decides whether a message must be parsed: the connection it is for (`Connection.readsParams`). */
export interface ParamsReader {
  readsParams(method: string): boolean;
}

/**
 * The client message in `body`. A request whose method nothing on the connection reads beyond its
 * id and method (`reader.readsParams`: session/prompt, `_vendor/*`…) is not parsed: its envelope
 * is checked on the bytes (`scanEnvelope`) and the body goes to the agent as it came, as the bare
 * Node server of bench/node-floor-server.mjs forwards it; what the connection keeps of it is
 * `{ jsonrpc, id, method }`. Everything else (notifications and responses too), and every body
 * the scan is not sure of, is parsed (`parseMessage`), which also gives the answer to an invalid
 * body: the scan never refuses one.
 * `JSON.parse` and the checks around it were ~10 µs of a steady turn's request path
 * (bench/README.md, "Where a steady turn's CPU goes").
 */
export function readMessage(body: Buffer, reader: ParamsReader | undefined): ParsedMessage {
  if (reader !== undefined) {
    const scanned = scanEnvelope(body);
    if (scanned !== undefined && !reader.readsParams(scanned.message.method!)) return scanned;
  }
  return parseMessage(body);
}

const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const QUOTE = 0x22;
const COMMA = 0x2c;
const MINUS = 0x2d;
const DOT = 0x2e;
const ZERO = 0x30;
const COLON = 0x3a;
const OPEN_ARRAY = 0x5b;
const BACKSLASH = 0x5c;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

/** Members of the envelope, as bits of `seen`: each may come once. */
const JSONRPC = 1;
const ID = 2;
const METHOD = 4;
const PARAMS = 8;
const REQUIRED = JSONRPC | ID | METHOD;

/** What the scan takes next. */
const VALUE = 0;
const KEY = 1;
const NAME_END = 2; // the `:` after a member name
const AFTER_VALUE = 3; // `,` or the container's close
const FIRST_KEY = 4; // a member name or `}`
const FIRST_VALUE = 5; // a value or `]`

/** The longest integer id taken here: 16 digits covers 2^53-1; longer ones go to `parseMessage`. */
const MAX_ID_DIGITS = 16;

/** Per byte: 1 for the escapes JSON allows after a backslash besides `u` (`" \ / b f n r t`). */
const SIMPLE_ESCAPE = new Uint8Array(256);
for (const c of '"\\/bfnrt') SIMPLE_ESCAPE[c.charCodeAt(0)] = 1;

/**
 * Per byte: 1 for digits, and for hexadecimal digits. Tables, not functions: every function the
 * scan calls per byte was one more for V8 to optimise in a connection's first requests.
 */
const DIGIT = new Uint8Array(256);
const HEX = new Uint8Array(256);
for (const c of "0123456789") DIGIT[c.charCodeAt(0)] = HEX[c.charCodeAt(0)] = 1;
for (const c of "abcdefABCDEF") HEX[c.charCodeAt(0)] = 1;

/** Whether each open container is an array (1) or an object (0), by depth. */
const arrays = new Uint8Array(MAX_JSON_DEPTH + 2);

/**
 * A request in `body` (a JSON object of exactly `jsonrpc` "2.0", an `id` that is a string of at
 * most MAX_STRING_ID_LENGTH bytes or an integer within ±(2^53-1) written as such, a `method`
 * string and optionally a `params` object; valid JSON throughout, UTF-8, at most MAX_JSON_DEPTH
 * deep, and one line between its braces), read without building it; `undefined` for any other
 * body, valid or not, and whenever in doubt: an escape in a member name, the id or the method, a
 * member name in params written with an escape (it could spell `sessionId`), an envelope member
 * twice, a line break between tokens. `parseMessage` would accept every body this accepts, and give the same id,
 * method and `params.sessionId`.
 *
 * One function and one loop over the bytes, a state machine with the open containers on a stack:
 * V8's optimising compiler compiles it once. Written as a recursive descent of a dozen small
 * functions it took ~15 compilations in a connection's first requests, and callgrind counted
 * more instructions over requests 1–1,500 than `parseMessage` (bench/README.md, "The request's
 * body without building objects").
 */
export function scanEnvelope(body: Buffer): ParsedMessage | undefined {
  const b = body;
  let end = b.length;
  while (end > 0 && isSpace(b[end - 1])) end--;
  let at = 0;
  while (at < end && isSpace(b[at])) at++;
  if (b[at] !== OPEN_OBJECT) return undefined;
  const start = at;
  let depth = 0;
  let expect = VALUE;
  let nonAscii = false;
  // The top-level member being read and where its value starts; the members seen so far.
  let member = 0;
  let seen = 0;
  let valueStart = 0;
  let id: JsonRpcId | undefined;
  let method: string | undefined;
  // Whether the member of params being read is `sessionId`, and the last `sessionId` read.
  let sessionKey = false;
  let sessionId: string | undefined;
  // The last value that ended, when it is a string: where it starts, its escapes, its bytes past ASCII.
  let stringAt = -1;
  let escaped = false;
  let high = false;
  while (at < end) {
    const c = b[at]!;
    if (c === SPACE || c === TAB) {
      at++;
      continue;
    }
    stringAt = -1;
    if (expect === AFTER_VALUE) {
      at++;
      if (c === COMMA) {
        expect = arrays[depth] === 1 ? VALUE : KEY;
        continue;
      }
      if (c !== (arrays[depth] === 1 ? CLOSE_ARRAY : CLOSE_OBJECT)) return undefined;
      depth--;
    } else if (expect === NAME_END) {
      if (c !== COLON) return undefined;
      expect = VALUE;
      at++;
      continue;
    } else if (c === QUOTE) {
      let i = at + 1;
      escaped = false;
      high = false;
      for (;;) {
        if (i >= end) return undefined;
        const d = b[i]!;
        if (d === QUOTE) break;
        if (d === BACKSLASH) {
          escaped = true;
          const e = b[i + 1]!;
          if (e === 0x75 /* u */) {
            if (HEX[b[i + 2]!] !== 1 || HEX[b[i + 3]!] !== 1 || HEX[b[i + 4]!] !== 1 || HEX[b[i + 5]!] !== 1)
              return undefined;
            i += 6;
          } else if (SIMPLE_ESCAPE[e] === 1) i += 2;
          else return undefined;
        } else if (d < SPACE) return undefined;
        else {
          if (d >= 0x80) high = true;
          i++;
        }
      }
      if (high) nonAscii = true;
      if (expect === KEY || expect === FIRST_KEY) {
        if (depth === 1) {
          member = escaped ? 0 : memberOf(b, at + 1, i);
          if (member === 0 || (seen & member) !== 0) return undefined;
          seen |= member;
        } else if (depth === 2 && member === PARAMS) {
          if (escaped) return undefined;
          sessionKey = i - at - 1 === 9 && sameBytes(b, at + 1, "sessionId");
        }
        expect = NAME_END;
        at = i + 1;
        continue;
      }
      stringAt = at;
      if (depth === 1) valueStart = at;
      at = i + 1;
    } else if (expect === KEY || expect === FIRST_KEY) {
      if (c !== CLOSE_OBJECT || expect !== FIRST_KEY) return undefined;
      depth--;
      at++;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (depth === 1) valueStart = at;
      if (++depth > MAX_JSON_DEPTH) return undefined;
      arrays[depth] = c === OPEN_ARRAY ? 1 : 0;
      expect = c === OPEN_ARRAY ? FIRST_VALUE : FIRST_KEY;
      at++;
      continue;
    } else if (c === CLOSE_ARRAY && expect === FIRST_VALUE) {
      depth--;
      at++;
    } else if (c === MINUS || DIGIT[c] === 1) {
      // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
      if (depth === 1) valueStart = at;
      if (c === MINUS) at++;
      if (b[at] === ZERO) at++;
      else if (DIGIT[b[at]!] === 1) while (DIGIT[b[at]!] === 1) at++;
      else return undefined;
      if (b[at] === DOT) {
        if (DIGIT[b[++at]!] !== 1) return undefined;
        while (DIGIT[b[at]!] === 1) at++;
      }
      if (b[at] === 0x65 /* e */ || b[at] === 0x45 /* E */) {
        at++;
        if (b[at] === 0x2b /* + */ || b[at] === MINUS) at++;
        if (DIGIT[b[at]!] !== 1) return undefined;
        while (DIGIT[b[at]!] === 1) at++;
      }
    } else {
      const word = c === 0x74 ? "true" : c === 0x66 ? "false" : c === 0x6e ? "null" : "";
      if (word === "" || !sameBytes(b, at, word)) return undefined;
      if (depth === 1) valueStart = at;
      at += word.length;
    }
    // A value ended at `at`: a scalar, or a container that closed back to `depth`.
    expect = AFTER_VALUE;
    if (depth === 1) {
      if (member === JSONRPC) {
        if (at - valueStart !== 5 || !sameBytes(b, valueStart, '"2.0"')) return undefined;
      } else if (member === ID) {
        id = idAt(b, valueStart, at, stringAt === valueStart && !escaped, high);
        if (id === undefined) return undefined;
      } else if (member === METHOD) {
        if (stringAt !== valueStart || escaped) return undefined;
        method = b.toString(high ? "utf8" : "latin1", valueStart + 1, at - 1);
      } else if (b[valueStart] !== OPEN_OBJECT) return undefined;
    } else if (depth === 2 && sessionKey) {
      // The last of two is the one `JSON.parse` keeps, and `sessionIdOf` takes only a string.
      sessionKey = false;
      if (stringAt >= 0 && escaped) return undefined;
      sessionId = stringAt >= 0 ? b.toString(high ? "utf8" : "latin1", stringAt + 1, at - 1) : undefined;
    } else if (depth === 0) break;
  }
  if (depth !== 0 || at !== end || (seen & REQUIRED) !== REQUIRED) return undefined;
  if (nonAscii && !isUtf8(b)) return undefined;
  const line = b.toString(nonAscii ? "utf8" : "latin1", start, end);
  return { message: { jsonrpc: "2.0", id, method }, line, sessionId };
}

/**
 * The id whose value lies between `start` and `end`: a string without escapes (`plain`) of at
 * most MAX_STRING_ID_LENGTH bytes, or an integer of at most MAX_ID_DIGITS digits within
 * ±(2^53-1), not `-0`; else undefined. The value is valid JSON already.
 */
function idAt(b: Buffer, start: number, end: number, plain: boolean, high: boolean): JsonRpcId | undefined {
  if (b[start] === QUOTE) {
    if (!plain || end - start - 2 > MAX_STRING_ID_LENGTH) return undefined;
    return b.toString(high ? "utf8" : "latin1", start + 1, end - 1);
  }
  let at = start;
  const negative = b[at] === MINUS;
  if (negative) at++;
  if (end - at > MAX_ID_DIGITS) return undefined;
  let value = 0;
  for (; at < end; at++) {
    const c = b[at]!;
    if (DIGIT[c] !== 1) return undefined;
    value = value * 10 + (c - ZERO);
  }
  // Exact below 2^53; a longer integer rounds to 2^53 or more, which this refuses.
  if (!Number.isSafeInteger(value) || (negative && value === 0)) return undefined;
  return negative ? -value : value;
}

function isSpace(c: number | undefined): boolean {
  return c === SPACE || c === TAB || c === LF || c === CR;
}

/** Which envelope member the name between `start` and `end` is (0: none of them). */
function memberOf(b: Buffer, start: number, end: number): number {
  switch (end - start) {
    case 2:
      return sameBytes(b, start, "id") ? ID : 0;
    case 6:
      if (sameBytes(b, start, "method")) return METHOD;
      return sameBytes(b, start, "params") ? PARAMS : 0;
    case 7:
      return sameBytes(b, start, "jsonrpc") ? JSONRPC : 0;
    default:
      return 0;
  }
}

function sameBytes(b: Buffer, start: number, word: string): boolean {
  for (let i = 0; i < word.length; i++) if (b[start + i] !== word.charCodeAt(i)) return false;
  return true;
}
