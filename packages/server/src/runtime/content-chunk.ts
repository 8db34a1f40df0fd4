/**
 * Most lines of a turn are text chunks: `session/update` notifications carrying
 * `agent_message_chunk`, `agent_thought_chunk` or `user_message_chunk` with `{type:"text"}`
 * content. Parsing each with JSON.parse was the largest cost of the streaming path (about 40 % of
 * the server's CPU per event), so lines in exactly the shape the ACP SDKs serialize them are
 * recognised by this pattern instead, on the agent's bytes: the line is a byte string (one
 * character per byte, `line-splitter.ts`), and a line it accepts goes into the event log as those
 * bytes, never decoded to text nor encoded again.
 *
 * The pattern is a strict subset of the JSON grammar (no whitespace, fixed key order, no duplicate
 * or extra keys, a session id of printable ASCII without `"` or `\`, string escapes checked), and
 * of UTF-8: the text's other bytes must form well-formed UTF-8 characters (no overlong forms, no
 * surrogates, nothing past U+10FFFF; the byte ranges of the Unicode standard's table 3-7). So a
 * line it matches is valid UTF-8 and valid JSON, its bytes are what decoding and encoding it again
 * would give, and it means what the captures say. Anything else, including the same message
 * serialized differently or text a decoder would repair (U+FFFD), is decoded and takes the
 * JSON.parse path.
 *
 * The text is written as a loop unrolled (`plain* (special plain*)*`): a run of plain ASCII
 * characters, then any number of escapes or multi-byte UTF-8 characters each followed by a run.
 * Every special starts with a byte no plain character and no other special starts with (the two
 * escapes differ at their second byte), so a text parses one way only and a line that fails at its
 * end backtracks in linear time. A run inside an alternation (`(?:[^"\\]+|…)*`) backtracks
 * exponentially (a 28-character text with an extra key took 1.5 s, and real agents add `_meta` to
 * long history chunks). The unrolled run is also what the regexp engine matches fastest: a greedy
 * loop over one character class, where `(?:plain|special)*` pushed a backtrack entry per
 * character. On 200-byte chunk lines it takes ~90–140 ns against ~260–440 ns for the character-
 * by-character form (plain, escaped and non-ASCII texts alike).
 */
const ASCII_CHAR = String.raw`[\x20\x21\x23-\x5b\x5d-\x7f]`;
const UTF8_CHAR = [
  String.raw`[\xc2-\xdf][\x80-\xbf]`,
  String.raw`\xe0[\xa0-\xbf][\x80-\xbf]`,
  String.raw`[\xe1-\xec\xee\xef][\x80-\xbf]{2}`,
  String.raw`\xed[\x80-\x9f][\x80-\xbf]`,
  String.raw`\xf0[\x90-\xbf][\x80-\xbf]{2}`,
  String.raw`[\xf1-\xf3][\x80-\xbf]{3}`,
  String.raw`\xf4[\x80-\x8f][\x80-\xbf]{2}`,
].join("|");
const ESCAPE = String.raw`\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}`;
const TEXT_CHUNK_LINE = new RegExp(
  String.raw`^\{"jsonrpc":"2\.0","method":"session/update","params":\{"sessionId":"${ASCII_CHAR}+",` +
    String.raw`"update":\{"sessionUpdate":"(?:agent_message_chunk|agent_thought_chunk|user_message_chunk)",` +
    String.raw`"content":\{"type":"text","text":"${ASCII_CHAR}*(?:(?:${ESCAPE}|${UTF8_CHAR})${ASCII_CHAR}*)*"\}\}\}\}$`,
);

/**
 * Longer lines are left to JSON.parse: the fast path is for the many small chunks of a stream, and
 * the regexp engine's backtrack stack overflows on texts of tens of megabytes.
 */
export const MAX_TEXT_CHUNK_LINE = 64 * 1024;

/** Where a text chunk's session id starts. */
const SESSION_ID_AT = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"'.length;

/** The session id the previous text chunk named, as a string of its own, and it with the quote that ends it. */
let lastSession = "";
let lastSessionQuoted = '"';

/**
 * The session id of a text-chunk notification line in canonical form, the line given as a byte
 * string (one character per byte, without its line break); `undefined` for any other line.
 */
export function textChunkSession(line: string): string | undefined {
  if (line.length > MAX_TEXT_CHUNK_LINE || !TEXT_CHUNK_LINE.test(line)) return undefined;
  // The id is ASCII (the same as bytes or as text), not empty, and has no `"` (nor escapes): it
  // ends at the next one, so the previous id and its quote found right where the id starts are
  // the whole id. One search: `startsWith` at an offset took ~170 ns on these lines, about as long
  // as the pattern, where `indexOf` takes ~30–80 ns.
  if (line.indexOf(lastSessionQuoted, SESSION_ID_AT) === SESSION_ID_AT) return lastSession;
  const end = line.indexOf('"', SESSION_ID_AT);
  // Cut from the line it would be a view of it, and the line a view of the agent's whole output
  // chunk (`line-splitter.ts`): kept in a session record, it would keep that chunk alive. The copy
  // is made once for a run of chunks of one session.
  lastSession = ` ${line.slice(SESSION_ID_AT, end)}`.slice(1);
  lastSessionQuoted = `${lastSession}"`;
  return lastSession;
}
