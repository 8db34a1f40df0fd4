/**
 * Deepest nesting of arrays and objects a request body may have. Deeper values are refused before
 * anything recurses over them: `JSON.stringify` overflows the stack at about 4,000 levels (a
 * `RangeError` wherever the server re-serializes), and serde_json, which agents written in Rust use,
 * refuses input nested deeper than 128 levels.
 */
export const MAX_JSON_DEPTH = 128;

export interface JsonScan {
  /** Deepest nesting of arrays and objects (0 for a scalar). */
  depth: number;
  /** The source text of the top-level member asked for (the last one, as `JSON.parse` keeps). */
  member: string | undefined;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * One pass over a text that `JSON.parse` accepted: its nesting depth and the source text of one
 * member of the top-level object, which the parsed value cannot give (`1.0` and `1` parse alike).
 * Iterative, so any depth is safe; strings are skipped with `indexOf`.
 */
export function scanJson(text: string, memberName?: string): JsonScan {
  let depth = 0;
  let maxDepth = 0;
  let keyNext = false;
  let key: string | undefined;
  let valueStart = -1;
  let member: string | undefined;
  const endMember = (at: number) => {
    if (valueStart >= 0) member = text.slice(valueStart, at).trim();
    valueStart = -1;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const end = closingQuote(text, i);
      if (depth === 1 && keyNext) {
        key = decodeKey(text.slice(i, end + 1));
        keyNext = false;
      }
      i = end;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      depth++;
      if (depth > maxDepth) maxDepth = depth;
      if (depth === 1) keyNext = c === 0x7b;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      if (depth === 1) endMember(i);
      depth--;
    } else if (depth === 1 && c === 0x3a /* : */) {
      valueStart = memberName !== undefined && key === memberName ? i + 1 : -1;
    } else if (depth === 1 && c === 0x2c /* , */) {
      endMember(i);
      keyNext = true;
    }
  }
  return { depth: maxDepth, member };
}

/** Index of the quote closing the string that opens at `open` (the text is valid JSON). */
function closingQuote(text: string, open: number): number {
  let at = open;
  for (;;) {
    at = text.indexOf('"', at + 1);
    let backslashes = 0;
    while (text.charCodeAt(at - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return at;
  }
}

function decodeKey(quoted: string): string {
  return quoted.includes("\\") ? (JSON.parse(quoted) as string) : quoted.slice(1, -1);
}
