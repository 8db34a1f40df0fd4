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
 * id and method (`reader.readsParams`: session/prompt, session/cancel…) is not parsed: its envelope
 * is checked on the bytes (`scanEnvelope`) and the body goes to the agent as it came, as the bare
 * Node server of bench/node-floor-server.mjs forwards it; what the connection keeps of it is
 * `{ jsonrpc, id, method }`. Everything else, and every body the scan is not sure of, is parsed
 * (`parseMessage`), which also gives the answer to an invalid body: the scan never refuses one.
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
const NINE = 0x39;
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

/** The longest integer id taken here: 16 digits covers 2^53-1; longer ones go to `parseMessage`. */
const MAX_ID_DIGITS = 16;

/** Escapes JSON allows after a backslash besides `u`: `" \ / b f n r t`. */
const SIMPLE_ESCAPE = new Uint8Array(128);
for (const c of '"\\/bfnrt') SIMPLE_ESCAPE[c.charCodeAt(0)] = 1;

/**
 * A request in `body` (a JSON object of exactly `jsonrpc` "2.0", an `id` that is a string of at
 * most MAX_STRING_ID_LENGTH bytes or an integer within ±(2^53-1) written as such, a `method`
 * string and optionally a `params` object; valid JSON throughout, UTF-8, at most MAX_JSON_DEPTH
 * deep, and one line between its braces), read without building it; `undefined` for any other
 * body, valid or not, and whenever in doubt: an escape in a member name, the id or the method, a
 * member name in params written with an escape (it could spell `sessionId`), a key twice, a line
 * break between tokens. `parseMessage` would accept every body this accepts, and give the same id,
 * method and `params.sessionId`.
 */
export function scanEnvelope(body: Buffer): ParsedMessage | undefined {
  return new EnvelopeScan(body).request();
}

/** One pass over the bytes; each method returns false at the first byte it does not accept. */
class EnvelopeScan {
  private at = 0;
  private depth = 0;
  /** Whether the last string read held a backslash escape, or any byte past ASCII. */
  private escaped = false;
  private high = false;
  /** Whether any string held a byte past ASCII (the body is then checked as UTF-8 once). */
  private nonAscii = false;
  private sessionId: string | undefined = undefined;

  constructor(private readonly bytes: Buffer) {}

  request(): ParsedMessage | undefined {
    const b = this.bytes;
    let at = 0;
    while (isSpace(b[at])) at++;
    if (b[at] !== OPEN_OBJECT) return undefined;
    const start = at;
    this.at = at + 1;
    this.depth = 1;
    let seen = 0;
    let id: JsonRpcId = 0;
    let method = "";
    for (;;) {
      this.blank();
      const keyStart = this.at + 1;
      if (b[this.at] !== QUOTE || !this.string() || this.escaped) return undefined;
      const member = memberOf(b, keyStart, this.at - 1);
      if (member === 0 || (seen & member) !== 0) return undefined;
      seen |= member;
      this.blank();
      if (b[this.at] !== COLON) return undefined;
      this.at++;
      this.blank();
      const valueStart = this.at;
      if (member === JSONRPC) {
        if (!isVersion(b, valueStart)) return undefined;
        this.at += 5;
      } else if (member === METHOD) {
        if (b[valueStart] !== QUOTE || !this.string() || this.escaped) return undefined;
        method = b.toString(this.high ? "utf8" : "latin1", valueStart + 1, this.at - 1);
      } else if (member === ID) {
        const value = this.id();
        if (value === undefined) return undefined;
        id = value;
      } else {
        if (b[valueStart] !== OPEN_OBJECT || !this.object(true)) return undefined;
      }
      this.blank();
      const next = b[this.at];
      if (next === COMMA) {
        this.at++;
        continue;
      }
      if (next !== CLOSE_OBJECT) return undefined;
      break;
    }
    const end = this.at + 1;
    at = end;
    while (isSpace(b[at])) at++;
    if (at !== b.length || (seen & REQUIRED) !== REQUIRED) return undefined;
    if (this.nonAscii && !isUtf8(b)) return undefined;
    const line = b.toString(this.nonAscii ? "utf8" : "latin1", start, end);
    return { message: { jsonrpc: "2.0", id, method }, line, sessionId: this.sessionId };
  }

  /** A string id (no escapes, at most MAX_STRING_ID_LENGTH bytes) or an integer one, else undefined. */
  private id(): JsonRpcId | undefined {
    const b = this.bytes;
    const start = this.at;
    if (b[start] === QUOTE) {
      if (!this.string() || this.escaped || this.at - start - 2 > MAX_STRING_ID_LENGTH) return undefined;
      return b.toString(this.high ? "utf8" : "latin1", start + 1, this.at - 1);
    }
    let at = start;
    const negative = b[at] === MINUS;
    if (negative) at++;
    // No leading zero (invalid JSON), and no `-0`: `parseMessage` decides those.
    const first = b[at]!;
    if (first === ZERO) {
      if (negative) return undefined;
      this.at = at + 1;
      return isDigit(b[this.at]) || isFractionOrExponent(b[this.at]) ? undefined : 0;
    }
    let value = 0;
    while (isDigit(b[at])) value = value * 10 + (b[at++]! - ZERO);
    const digits = at - start - (negative ? 1 : 0);
    if (digits === 0 || digits > MAX_ID_DIGITS || isFractionOrExponent(b[at])) return undefined;
    // Exact below 2^53; a longer integer rounds to 2^53 or more, which this refuses.
    if (!Number.isSafeInteger(value)) return undefined;
    this.at = at;
    return negative ? -value : value;
  }

  private value(): boolean {
    const c = this.bytes[this.at];
    if (c === QUOTE) return this.string();
    if (c === OPEN_OBJECT) return this.object(false);
    if (c === OPEN_ARRAY) return this.array();
    if (c === MINUS || isDigit(c)) return this.number();
    return this.literal("true") || this.literal("false") || this.literal("null");
  }

  /** An object; in `params`' own members, a `sessionId` is noted as `JSON.parse` would keep it. */
  private object(params: boolean): boolean {
    const b = this.bytes;
    if (++this.depth > MAX_JSON_DEPTH) return false;
    this.at++;
    this.blank();
    if (b[this.at] === CLOSE_OBJECT) {
      this.at++;
      this.depth--;
      return true;
    }
    for (;;) {
      const keyStart = this.at + 1;
      if (b[this.at] !== QUOTE || !this.string()) return false;
      const isSessionId = params && isSessionIdKey(b, keyStart, this.at - 1);
      if (params && this.escaped) return false;
      this.blank();
      if (b[this.at] !== COLON) return false;
      this.at++;
      this.blank();
      const valueStart = this.at;
      if (!this.value()) return false;
      if (isSessionId) {
        if (b[valueStart] !== QUOTE) this.sessionId = undefined;
        else if (this.escaped) return false;
        else this.sessionId = b.toString(this.high ? "utf8" : "latin1", valueStart + 1, this.at - 1);
      }
      this.blank();
      const next = b[this.at++];
      if (next === CLOSE_OBJECT) break;
      if (next !== COMMA) return false;
      this.blank();
    }
    this.depth--;
    return true;
  }

  private array(): boolean {
    const b = this.bytes;
    if (++this.depth > MAX_JSON_DEPTH) return false;
    this.at++;
    this.blank();
    if (b[this.at] === CLOSE_ARRAY) {
      this.at++;
      this.depth--;
      return true;
    }
    for (;;) {
      if (!this.value()) return false;
      this.blank();
      const next = b[this.at++];
      if (next === CLOSE_ARRAY) break;
      if (next !== COMMA) return false;
      this.blank();
    }
    this.depth--;
    return true;
  }

  /** A JSON string opening at `at`; `at` ends past its closing quote. */
  private string(): boolean {
    const b = this.bytes;
    const end = b.length;
    let at = this.at + 1;
    let escaped = false;
    let high = false;
    for (;;) {
      if (at >= end) return false;
      const c = b[at]!;
      if (c === QUOTE) break;
      if (c === BACKSLASH) {
        escaped = true;
        const e = b[at + 1]!;
        if (e === 0x75 /* u */) {
          if (!isHex(b[at + 2]) || !isHex(b[at + 3]) || !isHex(b[at + 4]) || !isHex(b[at + 5])) return false;
          at += 6;
        } else if (e < 128 && SIMPLE_ESCAPE[e] === 1) at += 2;
        else return false;
        continue;
      }
      if (c < SPACE) return false;
      if (c >= 0x80) high = true;
      at++;
    }
    this.at = at + 1;
    this.escaped = escaped;
    this.high = high;
    if (high) this.nonAscii = true;
    return true;
  }

  /** -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
  private number(): boolean {
    const b = this.bytes;
    let at = this.at;
    if (b[at] === MINUS) at++;
    if (b[at] === ZERO) at++;
    else if (isDigit(b[at])) while (isDigit(b[at])) at++;
    else return false;
    if (b[at] === DOT) {
      if (!isDigit(b[++at])) return false;
      while (isDigit(b[at])) at++;
    }
    if (b[at] === 0x65 /* e */ || b[at] === 0x45 /* E */) {
      at++;
      if (b[at] === 0x2b /* + */ || b[at] === MINUS) at++;
      if (!isDigit(b[at])) return false;
      while (isDigit(b[at])) at++;
    }
    this.at = at;
    return true;
  }

  private literal(word: string): boolean {
    const b = this.bytes;
    for (let i = 0; i < word.length; i++) if (b[this.at + i] !== word.charCodeAt(i)) return false;
    this.at += word.length;
    return true;
  }

  /** Spaces and tabs between tokens; a line break there is left for `parseMessage` (one line out). */
  private blank(): void {
    const b = this.bytes;
    while (b[this.at] === SPACE || b[this.at] === TAB) this.at++;
  }
}

function isSpace(c: number | undefined): boolean {
  return c === SPACE || c === TAB || c === LF || c === CR;
}

function isDigit(c: number | undefined): boolean {
  return c !== undefined && c >= ZERO && c <= NINE;
}

function isFractionOrExponent(c: number | undefined): boolean {
  return c === DOT || c === 0x65 /* e */ || c === 0x45; /* E */
}

function isHex(c: number | undefined): boolean {
  return c !== undefined && ((c >= ZERO && c <= NINE) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x66));
}

/** `"2.0"` at `at`. */
function isVersion(b: Buffer, at: number): boolean {
  return (
    b[at] === QUOTE && b[at + 1] === 0x32 && b[at + 2] === DOT && b[at + 3] === ZERO && b[at + 4] === QUOTE
  );
}

/** Which envelope member the name between `start` and `end` is (0: none of them). */
function memberOf(b: Buffer, start: number, end: number): number {
  switch (end - start) {
    case 2:
      return b[start] === 0x69 && b[start + 1] === 0x64 ? ID : 0;
    case 6:
      if (sameBytes(b, start, "method")) return METHOD;
      return sameBytes(b, start, "params") ? PARAMS : 0;
    case 7:
      return sameBytes(b, start, "jsonrpc") ? JSONRPC : 0;
    default:
      return 0;
  }
}

function isSessionIdKey(b: Buffer, start: number, end: number): boolean {
  return end - start === 9 && sameBytes(b, start, "sessionId");
}

function sameBytes(b: Buffer, start: number, word: string): boolean {
  for (let i = 0; i < word.length; i++) if (b[start + i] !== word.charCodeAt(i)) return false;
  return true;
}
