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

/**
 * A text-chunk line whose session id is `id` (a pattern), at the pattern's `lastIndex` of a text
 * of whole lines (sticky): the line and its break, `\n` or `\r\n` (the CR is the break's, as the
 * line splitter has it).
 */
function textChunkLine(id: string): RegExp {
  return new RegExp(
    String.raw`\{"jsonrpc":"2\.0","method":"session/update","params":\{"sessionId":"${id}",` +
      String.raw`"update":\{"sessionUpdate":"(?:agent_message_chunk|agent_thought_chunk|user_message_chunk)",` +
      String.raw`"content":\{"type":"text","text":"${ASCII_CHAR}*(?:(?:${ESCAPE}|${UTF8_CHAR})${ASCII_CHAR}*)*"\}\}\}\}\r?\n`,
    "y",
  );
}

/** Any session id: printable ASCII without `"` or `\`. */
const ANY_SESSION = textChunkLine(`${ASCII_CHAR}+`);

/**
 * Longer lines are left to JSON.parse: the fast path is for the many small chunks of a stream, and
 * the regexp engine's backtrack stack overflows on texts of tens of megabytes.
 */
export const MAX_TEXT_CHUNK_LINE = 64 * 1024;

/** Where a text chunk's session id starts. */
const SESSION_ID_AT = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"'.length;

/** Session ids longer than this get no pattern of their own (see `TextChunkScanner`). */
const MAX_PATTERN_ID = 256;
/** A session gets a pattern of its own at its this-many-th chunk (see `TextChunkScanner`). */
export const PATTERN_AFTER = 16;
/** This many sessions are remembered per connection; past it the scanner starts again. */
const MAX_SESSIONS = 32;

interface ScannedSession {
  /** The id, as a string of its own: the same one for every chunk of the session. */
  id: string;
  /** Chunks seen so far (up to `PATTERN_AFTER`). */
  chunks: number;
  /** A pattern with this id written in (`textChunkLine`), once the session had `PATTERN_AFTER` chunks. */
  line: RegExp | undefined;
}

/**
 * Recognises text-chunk lines in the agent's output where they are: in the byte string of a
 * chunk's whole lines (`line-splitter.ts`), each line at its offset, with no string cut per line
 * (a sticky pattern, not `^…$` on a slice). One per connection.
 *
 * The session id: a line the pattern for any id matches belongs to the previous chunk's session
 * when that id and a quote stand where the id starts (`startsWith`; the pattern says the id has
 * no `"`), else its id is cut out and looked up. A session that streams long gets a pattern with
 * its id written in (as `\xHH` escapes), tried first: one match of a literal where the general
 * pattern and the id check took ~60–80 ns more per 200-byte line. Making one costs ~0.1–0.25 ms
 * (parsing, then compiling the pattern to machine code at its second use), paid back after a few
 * thousand chunks, and a session's 16th chunk makes it. It was the 1,024th, so that short sessions
 * never paid; but then the first session of a server to get that far ran the making, and the own
 * pattern, for the first time inside the code TurboFan had compiled for the line scan
 * (`scanAgentText`, this inlined) without them: that code was deoptimised at about every
 * server's 1,024th `echo` turn and compiled again, with four or five functions compiled on their
 * own while it ran unoptimised (bench/README.md, "The agent-output path"). The 16th chunk comes
 * before that compilation (after ~65–130 lines), so both paths are in the code compiled; a session
 * of 16 to a few thousand chunks pays up to ~0.25 ms more, once.
 */
export class TextChunkScanner {
  /** After a match: the end of the line's bytes (before its break) and the start of the next line. */
  lineEnd = 0;
  next = 0;
  private current: ScannedSession = { id: "", chunks: 0, line: undefined };
  private readonly sessions = new Map<string, ScannedSession>();

  /**
   * The session id of the text-chunk notification in canonical form that starts at `from` of
   * `text` (whole lines, each ending in `\n`), and `lineEnd`/`next` set; `undefined` for any other
   * line.
   */
  match(text: string, from: number): string | undefined {
    // Only a rest of the text that could hold a longer line is searched for the line's end.
    if (text.length - from > MAX_TEXT_CHUNK_LINE + 1 && text.indexOf("\n", from) - from > MAX_TEXT_CHUNK_LINE)
      return undefined;
    let session = this.current;
    const own = session.line;
    if (own !== undefined) {
      own.lastIndex = from;
      if (own.test(text)) return this.found(text, own.lastIndex, session.id);
    }
    ANY_SESSION.lastIndex = from;
    if (!ANY_SESSION.test(text)) return undefined;
    const at = from + SESSION_ID_AT;
    const { id } = session;
    // An id of a session with its own pattern is not this line's: that pattern failed.
    if (own !== undefined || text.charCodeAt(at + id.length) !== 34 || !text.startsWith(id, at)) {
      session = this.lookUp(text.slice(at, text.indexOf('"', at)));
      this.current = session;
    }
    if (
      session.chunks < PATTERN_AFTER &&
      ++session.chunks === PATTERN_AFTER &&
      session.id.length <= MAX_PATTERN_ID
    )
      session.line = textChunkLine(escapeAll(session.id));
    return this.found(text, ANY_SESSION.lastIndex, session.id);
  }

  private lookUp(cut: string): ScannedSession {
    let session = this.sessions.get(cut);
    if (session === undefined) {
      if (this.sessions.size >= MAX_SESSIONS) this.sessions.clear();
      // Cut from the text it would be a view of it, and the text a view of the agent's whole output
      // chunk: kept in a session record, it would keep that chunk alive. A copy is made once per id.
      const id = ` ${cut}`.slice(1);
      session = { id, chunks: 0, line: undefined };
      this.sessions.set(id, session);
    }
    return session;
  }

  private found(text: string, next: number, session: string): string {
    this.next = next;
    this.lineEnd = text.charCodeAt(next - 2) === 13 ? next - 2 : next - 1;
    return session;
  }
}

/** Every character of `id` as a `\xHH` escape (the id is ASCII): a literal in a pattern. */
function escapeAll(id: string): string {
  let out = "";
  for (let i = 0; i < id.length; i++) out += `\\x${id.charCodeAt(i).toString(16).padStart(2, "0")}`;
  return out;
}
