/**
 * Splits a byte stream into `\n`-delimited lines without copying more than needed. A line longer
 * than `maxLineBytes` is an error: ACP messages are single lines, and an unbounded one would grow
 * memory without limit.
 */
export class LineSplitter {
  private partial: Buffer[] = [];
  private partialBytes = 0;

  constructor(
    private readonly maxLineBytes: number,
    private readonly onLine: (line: string) => void,
    private readonly onOversize: (bytes: number) => void,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl !== -1; nl = chunk.indexOf(10, start)) {
      let line: string;
      if (this.partialBytes > 0) {
        this.partial.push(chunk.subarray(start, nl));
        line = Buffer.concat(this.partial).toString("utf8");
        this.partial = [];
        this.partialBytes = 0;
      } else {
        line = chunk.toString("utf8", start, nl);
      }
      start = nl + 1;
      if (line.length > 0 && line !== "\r") this.onLine(line.endsWith("\r") ? line.slice(0, -1) : line);
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
}
