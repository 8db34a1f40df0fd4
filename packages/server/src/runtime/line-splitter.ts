/**
 * Splits a byte stream into `\n`-delimited lines without copying more than needed. A line longer
 * than `maxLineBytes` is an error: ACP messages are single lines, and an unbounded one would grow
 * memory without limit.
 *
 * A consumer may `scan` the lines where they are first: it is given the text of whole lines (each
 * with its `\n`) as a byte string, one character per byte (latin1), the agent's bytes as they are,
 * not decoded; the same as bytes (a `Uint8Array`, same offsets); and the offset of one line. It
 * returns where the next line starts when it took that line, -1 when not (the line then goes to
 * `onLine`). Most of a turn's lines go into the event log as those bytes (`content-chunk.ts`,
 * `agent-answer.ts`), and decoding each as UTF-8 only to encode it again cost more than the
 * recognition itself on text that is not ASCII. The whole lines of a chunk are converted with one
 * call: the scan matches at offsets of that string (a sticky pattern), where a conversion per line
 * cost ~125 ns more per line (most of a turn's chunks hold hundreds), and cutting each line out of
 * the text, and finding its end first, ~40 and ~20 ns a line, more than a quarter of the
 * recognition. A string kept past the chunk keeps the chunk's string alive: a consumer that keeps
 * a cut of it copies it (see `content-chunk.ts`).
 *
 * The other lines go to `onLine` as their bytes: the chunk and the line's offsets in it, for the
 * consumer to decode (`toString("utf8", start, end)`), which costs half of decoding the line's
 * byte string (`Buffer.from(line, "latin1")` first: ~220 against ~460 ns for a 250-byte line). A
 * `\r` before the `\n` is not part of the line; empty lines are skipped.
 */
export type LineScan = (text: string, bytes: Uint8Array, from: number) => number;

export class LineSplitter {
  private partial: Buffer[] = [];
  private partialBytes = 0;

  constructor(
    private readonly maxLineBytes: number,
    private readonly onLine: (chunk: Buffer, start: number, end: number) => void,
    private readonly onOversize: (bytes: number) => void,
    private readonly scan?: LineScan,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    if (this.partialBytes > 0) {
      const first = chunk.indexOf(10);
      if (first !== -1) {
        this.partial.push(chunk.subarray(0, first + 1));
        const joined = Buffer.concat(this.partial);
        this.partial = [];
        this.partialBytes = 0;
        start = first + 1;
        this.lines(joined, 0, joined.length);
      }
    }
    // An agent writes whole lines: a read nearly always ends with one's `\n`, found without
    // `lastIndexOf` (a call into C++ with its argument checks, ~1 µs a read with the `indexOf` above
    // that now runs only after a partial line).
    const last = chunk[chunk.length - 1] === 10 ? chunk.length - 1 : chunk.lastIndexOf(10);
    if (last >= start) {
      this.lines(chunk, start, last + 1);
      start = last + 1;
    }
    if (start < chunk.length) {
      this.partialBytes += chunk.length - start;
      if (this.partialBytes > this.maxLineBytes) {
        const bytes = this.partialBytes;
        this.partial = [];
        this.partialBytes = 0;
        this.onOversize(bytes);
        return;
      }
      this.partial.push(chunk.subarray(start));
    }
  }

  /** The whole lines of `chunk` from `start` to `end`, each with its `\n`. */
  private lines(chunk: Buffer, start: number, end: number): void {
    const text = chunk.toString("latin1", start, end);
    const { scan } = this;
    // A plain Uint8Array (a Buffer's `subarray` is Node's own, slower than the builtin).
    const bytes = scan && new Uint8Array(chunk.buffer, chunk.byteOffset + start, end - start);
    for (let from = 0; from < text.length;) {
      if (scan !== undefined) {
        const next = scan(text, bytes!, from);
        if (next !== -1) {
          from = next;
          continue;
        }
      }
      const nl = text.indexOf("\n", from);
      // The line's bytes, without a CR before the `\n` (`charCodeAt`, not `endsWith("\r")`, which is
      // a builtin call per line); an empty line is skipped.
      const end = from < nl && text.charCodeAt(nl - 1) === 13 ? nl - 1 : nl;
      if (end > from) this.onLine(chunk, start + from, start + end);
      from = nl + 1;
    }
  }
}
