/**
 * Most lines of a turn are text chunks: `session/update` notifications carrying
 * `agent_message_chunk`, `agent_thought_chunk` or `user_message_chunk` with `{type:"text"}`
 * content. Parsing each with JSON.parse was the largest cost of the streaming path (about 40 % of
 * the server's CPU per event), so lines in exactly the shape the ACP SDKs serialize them are
 * recognised by this pattern instead. It is a strict subset of the JSON grammar (no whitespace,
 * fixed key order, no duplicate or extra keys, string escapes checked), so a line it matches is
 * valid JSON and means what the captures say; anything else, including the same message
 * serialized differently, takes the JSON.parse path.
 */
const TEXT_CHUNK_LINE = new RegExp(
  String.raw`^\{"jsonrpc":"2\.0","method":"session/update","params":\{"sessionId":"([^"\\\u0000-\u001f]+)",` +
    String.raw`"update":\{"sessionUpdate":"(?:agent_message_chunk|agent_thought_chunk|user_message_chunk)",` +
    String.raw`"content":\{"type":"text","text":"(?:[^"\\\u0000-\u001f]+|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"\}\}\}\}$`,
);

/** The session id of a text-chunk notification line in canonical form; `undefined` for any other line. */
export function textChunkSession(line: string): string | undefined {
  return TEXT_CHUNK_LINE.exec(line)?.[1];
}
