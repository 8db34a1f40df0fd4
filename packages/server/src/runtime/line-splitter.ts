/**
 * Splits a byte stream into `\n`-delimited lines without copying more than needed. A line longer
 * than `maxLineBytes` is an error: ACP messages are single lines, and an unbounded one would grow
 * memory without limit.
 *
 * A line is handed on as a byte string: one character per byte (latin1), the agent's bytes as
 * they are, not decoded. Most of a turn's lines go into the event log as those bytes
 * (`content-chunk.ts`), and decoding each as UTF-8 only to encode it again cost more than the
 * recognition itself on text that is not ASCII; a consumer that needs the text decodes the rare
 * other lines (`Buffer.from(line, "latin1").toString("utf8")`). The whole lines of a chunk are
 * converted with one call and cut from that string: a slice is a view of it, where a conversion
 * per line cost ~125 ns more per line (most of a turn's chunks hold hundreds). A line kept past
 * the chunk keeps the chunk's string alive: a consumer that keeps one copies it (see
 * `content-chunk.ts`). A `\r` before the `\n` is not part of the line; empty lines are skipped.
 *
 * A consumer may `scan` the lines where they are first: it is given the text of whole lines (each
 * with its `\n`), the same as bytes (a `Uint8Array`, same offsets) and the offset of one line, and
 * returns where the next line starts when it took that line, -1 when not (the line then goes to
 * `onLine`). The text-chunk recogniser works this way
 * (`content-chunk.ts`): cutting each line out of the text, and finding its end first, cost ~40
 * and ~20 ns a line, more than a quarter of the recognition.
 */
export type LineScan = (text: string, bytes: Uint8Array, from: number) => number;

export class LineSplitter {
  private partial: Buffer[] = [];
  private partialBytes = 0;

  constructor(
    private readonly maxLineBytes: number,
    private readonly onLine: (line: string) => void,
    private readonly onOversize: (bytes: number) => void,
    private readonly scan?: LineScan,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    const first = chunk.indexOf(10);
    if (first !== -1 && this.partialBytes > 0) {
      this.partial.push(chunk.subarray(0, first + 1));
      const joined = Buffer.concat(this.partial);
      this.partial = [];
      this.partialBytes = 0;
      start = first + 1;
      this.lines(joined, 0, joined.length);
    }
    const last = chunk.lastIndexOf(10);
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
      this.line(text.slice(from, nl));
      from = nl + 1;
    }
  }

  private line(line: string): void {
    // `charCodeAt`, not `endsWith("\r")`, which is a builtin call per line.
    const cr = line.charCodeAt(line.length - 1) === 13;
    if (line.length > (cr ? 1 : 0)) this.onLine(cr ? line.slice(0, -1) : line);
  }
}
