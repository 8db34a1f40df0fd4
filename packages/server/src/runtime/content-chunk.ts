/**
 * Most lines of a turn are text chunks: `session/update` notifications carrying
 * `agent_message_chunk`, `agent_thought_chunk` or `user_message_chunk` with `{type:"text"}`
 * content. Parsing each with JSON.parse was the largest cost of the streaming path (about 40 % of
 * the server's CPU per event), so lines in exactly the shape the ACP SDKs serialize them are
 * recognised by this pattern instead. It is a strict subset of the JSON grammar (no whitespace,
 * fixed key order, no duplicate or extra keys, string escapes checked), so a line it matches is
 * valid JSON and means what the captures say; anything else, including the same message
 * serialized differently, takes the JSON.parse path.
 *
 * The text loop repeats one character or one escape at a time, never a run (`[^"\\]+`): the
 * alternatives then start with different characters, so a line that fails at its end backtracks
 * in linear time. A run inside the repetition backtracks exponentially (a 28-character text with
 * an extra key took 1.5 s, and real agents add `_meta` to long history chunks).
 */
const TEXT_CHUNK_LINE = new RegExp(
  String.raw`^\{"jsonrpc":"2\.0","method":"session/update","params":\{"sessionId":"[^"\\\u0000-\u001f]+",` +
    String.raw`"update":\{"sessionUpdate":"(?:agent_message_chunk|agent_thought_chunk|user_message_chunk)",` +
    String.raw`"content":\{"type":"text","text":"(?:[^"\\\u0000-\u001f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"\}\}\}\}$`,
);

/**
 * Longer lines are left to JSON.parse: the fast path is for the many small chunks of a stream, and
 * the regexp engine's backtrack stack overflows on texts of tens of megabytes.
 */
export const MAX_TEXT_CHUNK_LINE = 64 * 1024;

/** Where a text chunk's session id starts. */
const SESSION_ID_AT = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"'.length;

/** The session id the previous text chunk named, as a string of its own. */
let lastSession = "";

/** The session id of a text-chunk notification line in canonical form; `undefined` for any other line. */
export function textChunkSession(line: string): string | undefined {
  if (line.length > MAX_TEXT_CHUNK_LINE || !TEXT_CHUNK_LINE.test(line)) return undefined;
  // The id has no `"` (nor escapes): it ends at the next one.
  const end = line.indexOf('"', SESSION_ID_AT);
  if (end - SESSION_ID_AT === lastSession.length && line.startsWith(lastSession, SESSION_ID_AT))
    return lastSession;
  // Cut from the line it would be a view of it, and the line a view of the agent's whole output
  // chunk (`line-splitter.ts`): kept in a session record, it would keep that chunk alive. The copy
  // is made once for a run of chunks of one session.
  lastSession = ` ${line.slice(SESSION_ID_AT, end)}`.slice(1);
  return lastSession;
}
