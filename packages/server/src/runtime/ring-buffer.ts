/** Keeps the last `capacity` characters of a text stream (e.g. an agent's stderr). */
export class TextRing {
  private chunks: string[] = [];
  private length = 0;

  constructor(private readonly capacity: number) {}

  push(text: string): void {
    this.chunks.push(text);
    this.length += text.length;
    while (this.length - this.chunks[0]!.length >= this.capacity) this.length -= this.chunks.shift()!.length;
  }

  /** The last `max` characters (all that is kept by default). */
  tail(max = this.capacity): string {
    const text = this.chunks.join("");
    return text.length > max ? text.slice(text.length - max) : text;
  }
}
