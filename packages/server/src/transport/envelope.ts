import { MAX_JSON_DEPTH } from "../http/json.js";
import type { JsonRpcId } from "../protocol.js";
import { DIGIT, jsonEnd, jsonStrings, sameBytes } from "../runtime/json-scan.js";
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
const ZERO = 0x30;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

/** Members of the envelope, as bits of `seen`: each may come once. */
const JSONRPC = 1;
const ID = 2;
const METHOD = 4;
const PARAMS = 8;
const REQUIRED = JSONRPC | ID | METHOD;

/** The longest integer id taken here: 16 digits covers 2^53-1; longer ones go to `parseMessage`. */
const MAX_ID_DIGITS = 16;

/** What `members` has read of the body being scanned (one scan at a time: it is synchronous). */
let seen = 0;
let nonAscii = false;
let id: JsonRpcId | undefined;
let method: string | undefined;
let sessionId: string | undefined;

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
 * The envelope's members and those of its params are read here (`members`), each value checked by
 * the one-loop JSON scan of `runtime/json-scan.ts` (`jsonEnd`), which says why it is one loop.
 */
export function scanEnvelope(body: Buffer): ParsedMessage | undefined {
  const b = body;
  let end = b.length;
  // JSON's whitespace around the object, skipped inline (as in `members`).
  let c = b[end - 1];
  while (end > 0 && (c === SPACE || c === LF || c === CR || c === TAB)) c = b[--end - 1];
  let start = 0;
  c = b[0];
  while (start < end && (c === SPACE || c === LF || c === CR || c === TAB)) c = b[++start];
  if (b[start] !== OPEN_OBJECT) return undefined;
  seen = 0;
  nonAscii = false;
  id = method = sessionId = undefined;
  const at = members(b, start + 1, end, 1);
  if (at !== end || (seen & REQUIRED) !== REQUIRED) return undefined;
  const line = b.toString(nonAscii ? "utf8" : "latin1", start, end);
  return { message: { jsonrpc: "2.0", id, method }, line, sessionId };
}

/**
 * The members of the envelope (`level` 1) or of its params (2), whose `{` is before `at`: the end
 * of the object, or -1 (invalid, or not what `scanEnvelope` takes). Before `end`, which is followed
 * by whitespace or nothing. Spaces and tabs are skipped inline, not by a helper: one function
 * less for V8 to compile in a connection's first requests.
 */
function members(b: Buffer, at: number, end: number, level: number): number {
  while (at < end && (b[at] === SPACE || b[at] === TAB)) at++;
  if (b[at] === CLOSE_OBJECT) return at + 1;
  for (;;) {
    // The member's name, without escapes (one could spell an envelope member, or `sessionId` in params).
    if (b[at] !== QUOTE) return -1;
    const nameEnd = jsonEnd(b, at, end, 0, false);
    if (nameEnd === -1 || jsonStrings.escaped) return -1;
    let member = 0;
    let sessionKey = false;
    if (level === 1) {
      member = memberOf(b, at + 1, nameEnd - 1);
      if (member === 0 || (seen & member) !== 0) return -1;
      seen |= member;
    } else {
      if (jsonStrings.nonAscii) nonAscii = true;
      sessionKey = nameEnd - at === 11 && sameBytes(b, at + 1, "sessionId");
    }
    at = nameEnd;
    while (at < end && (b[at] === SPACE || b[at] === TAB)) at++;
    if (b[at] !== COLON) return -1;
    at++;
    while (at < end && (b[at] === SPACE || b[at] === TAB)) at++;
    const valueStart = at;
    if (member === PARAMS) {
      if (b[at] !== OPEN_OBJECT || (at = members(b, at + 1, end, 2)) === -1) return -1;
    } else {
      if ((at = jsonEnd(b, at, end, MAX_JSON_DEPTH - level, true)) === -1) return -1;
      const { escaped, nonAscii: high } = jsonStrings;
      if (high) nonAscii = true;
      const string = b[valueStart] === QUOTE;
      if (member === JSONRPC) {
        if (at - valueStart !== 5 || !sameBytes(b, valueStart, '"2.0"')) return -1;
      } else if (member === ID) {
        id = idAt(b, valueStart, at, string && !escaped, high);
        if (id === undefined) return -1;
      } else if (member === METHOD) {
        if (!string || escaped) return -1;
        method = b.toString(high ? "utf8" : "latin1", valueStart + 1, at - 1);
      } else if (sessionKey) {
        // The last of two is the one `JSON.parse` keeps, and `sessionIdOf` takes only a string.
        if (string && escaped) return -1;
        sessionId = string ? b.toString(high ? "utf8" : "latin1", valueStart + 1, at - 1) : undefined;
      }
    }
    while (at < end && (b[at] === SPACE || b[at] === TAB)) at++;
    const c = b[at];
    if (c === CLOSE_OBJECT) return at + 1;
    if (c !== COMMA) return -1;
    at++;
    while (at < end && (b[at] === SPACE || b[at] === TAB)) at++;
  }
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
