import type { ServerResponse } from "node:http";
import type { EventBatch } from "./event-log.js";

/**
 * One open `text/event-stream` response. Writes are pull-style: `ready` turns false when the
 * socket buffer is full and back to true on `drain`, and the owner writes only while ready, so
 * a slow reader slows the agent down instead of growing memory.
 */
export class SseStream {
  /** Sequence number of the last event written to this stream. */
  cursor = 0;
  private waiting = false;
  private ended = false;
  private keepAlive: NodeJS.Timeout | undefined;
  private readonly closeHandlers: Array<() => void> = [];

  constructor(
    private readonly res: ServerResponse,
    private readonly options: { keepAliveMs: number; retryMs: number; onDrain: () => void },
  ) {
    res.once("close", () => this.finish());
  }

  get ready(): boolean {
    return !this.waiting && !this.ended;
  }

  /** Sends headers and the priming event (cursor id, `retry`, empty data). */
  start(cursor: number, primingId: string | undefined): void {
    this.cursor = cursor;
    const headers: Record<string, string> = {
      "content-type": "text/event-stream",
      "cache-control": "no-cache, no-transform",
      "x-accel-buffering": "no",
    };
    if (this.res.req.httpVersionMajor === 1) headers.connection = "keep-alive";
    this.res.writeHead(200, headers);
    this.res.flushHeaders();
    this.write(
      primingId
        ? `id: ${primingId}\nretry: ${this.options.retryMs}\ndata: \n\n`
        : `retry: ${this.options.retryMs}\n\n`,
    );
    this.keepAlive = setInterval(() => {
      if (this.ready) this.write(":\n\n");
    }, this.options.keepAliveMs);
    this.keepAlive.unref();
  }

  writeEvents(epoch: string, batch: EventBatch): void {
    let text = "";
    let seq = batch.first;
    for (const data of batch.data) text += `id: ${epoch}.${seq++}\ndata: ${data}\n\n`;
    this.cursor = seq - 1;
    this.write(text);
  }

  onClose(handler: () => void): void {
    if (this.ended) handler();
    else this.closeHandlers.push(handler);
  }

  end(): void {
    if (this.ended) return;
    this.res.end();
    this.finish();
  }

  private write(text: string): void {
    if (this.ended) return;
    if (!this.res.write(text)) {
      this.waiting = true;
      this.res.once("drain", () => {
        this.waiting = false;
        this.options.onDrain();
      });
    }
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.keepAlive);
    for (const handler of this.closeHandlers.splice(0)) handler();
  }
}
