/**
 * JSON checked on its bytes without building anything: where a value ends, whether it is JSON in
 * well-formed UTF-8. The two scans that spare a parse on a turn's hot path use it: the agent's
 * answer (`agent-answer.ts`, its result) and the client's request body (`transport/envelope.ts`,
 * each member of the envelope).
 *
 * One function and one loop over the bytes, a state machine with the open containers on a stack,
 * and tables rather than helpers: V8's optimising compiler compiles it once. Written as a recursive
 * descent of a dozen small functions it took ~15 compilations in a connection's first requests,
 * and callgrind counted more instructions over requests 1–1,500 than the parse it spares
 * (`parseMessage`; bench/README.md, "The request's body without building objects").
 */

const TAB = 0x09;
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

/** What the scan takes next. */
const VALUE = 0;
const KEY = 1;
const NAME_END = 2; // the `:` after a member name
const AFTER_VALUE = 3; // `,` or the container's close
const FIRST_KEY = 4; // a member name or `}`
const FIRST_VALUE = 5; // a value or `]`

/** Per byte: 1 for the escapes JSON allows after a backslash besides `u` (`" \ / b f n r t`). */
const SIMPLE_ESCAPE = new Uint8Array(256);
for (const c of '"\\/bfnrt') SIMPLE_ESCAPE[c.charCodeAt(0)] = 1;

/** Per byte: 1 for digits, and for hexadecimal digits. */
export const DIGIT = new Uint8Array(256);
const HEX = new Uint8Array(256);
for (const c of "0123456789") DIGIT[c.charCodeAt(0)] = HEX[c.charCodeAt(0)] = 1;
for (const c of "abcdefABCDEF") HEX[c.charCodeAt(0)] = 1;

/**
 * Per first byte of a multi-byte UTF-8 character: how many continuation bytes follow (0: it starts
 * none), and the range of the second, from the Unicode standard's table 3-7 (no overlong forms, no
 * surrogates, nothing past U+10FFFF). The later continuation bytes are 0x80–0xBF.
 */
const UTF8_TAIL = new Uint8Array(256);
const UTF8_LOW = new Uint8Array(256).fill(0x80);
const UTF8_HIGH = new Uint8Array(256).fill(0xbf);
UTF8_TAIL.fill(1, 0xc2, 0xe0);
UTF8_TAIL.fill(2, 0xe0, 0xf0);
UTF8_TAIL.fill(3, 0xf0, 0xf5);
UTF8_LOW[0xe0] = 0xa0;
UTF8_HIGH[0xed] = 0x9f;
UTF8_LOW[0xf0] = 0x90;
UTF8_HIGH[0xf4] = 0x8f;

/** Whether each open container is an array (1) or an object (0), by depth; grown to the deepest asked. */
let arrays = new Uint8Array(130);

/** What the strings of the last value `jsonEnd` took had (member names included). */
export const jsonStrings = {
  /** A backslash escape. */
  escaped: false,
  /** A byte past ASCII (then the value's text must be decoded as UTF-8, not latin1). */
  nonAscii: false,
};

/**
 * The end of the JSON value that starts at `at` of `b` (a scalar, or a container through its
 * close), or -1 if none ends before `end`: valid JSON, strings with their escapes checked, no
 * control characters and well-formed UTF-8, containers nested at most `maxDepth` deep (a scalar
 * is 0 deep), spaces and tabs between tokens if `spaces` (no other whitespace, and none before the
 * value). `end` is the end of `b` or comes before a byte that no token continues with (whitespace).
 * `jsonStrings` says what the value's strings had.
 */
export function jsonEnd(b: Uint8Array, at: number, end: number, maxDepth: number, spaces: boolean): number {
  if (arrays.length <= maxDepth) arrays = new Uint8Array(maxDepth + 1);
  let depth = 0;
  let expect = VALUE;
  let escaped = false;
  let nonAscii = false;
  while (at < end) {
    const c = b[at]!;
    if (spaces && (c === SPACE || c === TAB)) {
      at++;
      continue;
    }
    if (expect === AFTER_VALUE) {
      at++;
      if (c === COMMA) {
        expect = arrays[depth] === 1 ? VALUE : KEY;
        continue;
      }
      if (c !== (arrays[depth] === 1 ? CLOSE_ARRAY : CLOSE_OBJECT)) return -1;
      depth--;
    } else if (expect === NAME_END) {
      if (c !== COLON) return -1;
      expect = VALUE;
      at++;
      continue;
    } else if (c === QUOTE) {
      let i = at + 1;
      for (;;) {
        // A read past `end` below moves `i` past it too.
        if (i >= end) return -1;
        const d = b[i]!;
        if (d === QUOTE) break;
        if (d === BACKSLASH) {
          escaped = true;
          const e = b[i + 1]!;
          if (e === 0x75 /* u */) {
            if (HEX[b[i + 2]!] !== 1 || HEX[b[i + 3]!] !== 1 || HEX[b[i + 4]!] !== 1 || HEX[b[i + 5]!] !== 1)
              return -1;
            i += 6;
          } else if (SIMPLE_ESCAPE[e] === 1) i += 2;
          else return -1;
        } else if (d < SPACE) return -1;
        else if (d < 0x80) i++;
        else {
          const tail = UTF8_TAIL[d]!;
          const second = b[i + 1]!;
          if (tail === 0 || !(second >= UTF8_LOW[d]! && second <= UTF8_HIGH[d]!)) return -1;
          if (tail > 1 && (b[i + 2]! & 0xc0) !== 0x80) return -1;
          if (tail > 2 && (b[i + 3]! & 0xc0) !== 0x80) return -1;
          nonAscii = true;
          i += tail + 1;
        }
      }
      at = i + 1;
      if (expect === KEY || expect === FIRST_KEY) {
        expect = NAME_END;
        continue;
      }
    } else if (expect === KEY || expect === FIRST_KEY) {
      if (c !== CLOSE_OBJECT || expect !== FIRST_KEY) return -1;
      depth--;
      at++;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (++depth > maxDepth) return -1;
      arrays[depth] = c === OPEN_ARRAY ? 1 : 0;
      expect = c === OPEN_ARRAY ? FIRST_VALUE : FIRST_KEY;
      at++;
      continue;
    } else if (c === CLOSE_ARRAY && expect === FIRST_VALUE) {
      depth--;
      at++;
    } else if (c === MINUS || DIGIT[c] === 1) {
      // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
      if (c === MINUS) at++;
      if (b[at] === ZERO) at++;
      else if (DIGIT[b[at]!] === 1) while (DIGIT[b[at]!] === 1) at++;
      else return -1;
      if (b[at] === DOT) {
        if (DIGIT[b[++at]!] !== 1) return -1;
        while (DIGIT[b[at]!] === 1) at++;
      }
      if (b[at] === 0x65 /* e */ || b[at] === 0x45 /* E */) {
        at++;
        if (b[at] === 0x2b /* + */ || b[at] === MINUS) at++;
        if (DIGIT[b[at]!] !== 1) return -1;
        while (DIGIT[b[at]!] === 1) at++;
      }
    } else {
      const word = c === 0x74 ? "true" : c === 0x66 ? "false" : c === 0x6e ? "null" : "";
      if (word === "" || !sameBytes(b, at, word)) return -1;
      at += word.length;
    }
    // A value ended at `at`: a scalar, or a container that closed back to `depth`.
    if (depth === 0) {
      jsonStrings.escaped = escaped;
      jsonStrings.nonAscii = nonAscii;
      return at;
    }
    expect = AFTER_VALUE;
  }
  return -1;
}

/** Whether the bytes at `start` of `b` are `word` (ASCII). */
export function sameBytes(b: Uint8Array, start: number, word: string): boolean {
  for (let i = 0; i < word.length; i++) if (b[start + i] !== word.charCodeAt(i)) return false;
  return true;
}
