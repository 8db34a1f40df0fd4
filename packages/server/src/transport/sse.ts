/**
 * Server-sent events: the one module that writes `text/event-stream` bodies (the `/v2/rpc`
 * connection stream, process logs, install progress). A connection's stream is built from the
 * runtime's outbound reader (`streamConnection`); the WebSocket transport (`websocket.ts`) reads
 * the same reader.
 */
import type { ServerResponse } from "node:http";
import { batchLength, type Connection, type EventBatch } from "../runtime/connection.js";
import { eventId, eventIdPrefix } from "./event-ids.js";

export interface SseOptions {
  /** Interval of `:` keep-alive comments; none when unset. */
  keepAliveMs?: number;
  /** The `retry:` hint of the first event; none when unset. */
  retryMs?: number;
  /** Called when a full socket buffer drained: the writer may write again. */
  onDrain?: () => void;
  /** A reader that leaves the socket full this long is disconnected. */
  stallMs?: number;
  /** `cache-control` of the response (default `no-cache, no-transform`). */
  cacheControl?: string;
}

/**
 * One SSE event. `id` and `event` are the server's own tokens; `data` must be one line (agent
 * lines are split at LF and stripped of bare CRs before they get here, see `connection.ts`).
 */
export function sseEvent(data: string, id?: string, event?: string): string {
  return `${id === undefined ? "" : `id: ${id}\n`}${event === undefined ? "" : `event: ${event}\n`}data: ${data}\n\n`;
}

/**
 * An open `text/event-stream` response. Writes are pull-style: `ready` turns false when the
 * socket buffer is full and back to true on `drain`, and the owner writes only while ready, so a
 * slow reader slows the producer down instead of growing memory.
 */
export class SseResponse {
  private waiting = false;
  private ended = false;
  private keepAlive: NodeJS.Timeout | undefined;
  private stall: NodeJS.Timeout | undefined;
  private readonly closeHandlers: Array<() => void> = [];

  constructor(
    private readonly res: ServerResponse,
    private readonly options: SseOptions = {},
  ) {
    res.once("close", () => this.finish());
  }

  get ready(): boolean {
    return !this.waiting && !this.ended && !this.res.destroyed;
  }

  /** Sends the headers and a first event: `primingId` (with empty data) and the `retry:` hint. */
  open(primingId?: string): void {
    const headers: Record<string, string> = {
      "content-type": "text/event-stream",
      "cache-control": this.options.cacheControl ?? "no-cache, no-transform",
      "x-accel-buffering": "no",
    };
    if (this.res.req.httpVersionMajor === 1) headers.connection = "keep-alive";
    this.res.writeHead(200, headers);
    this.res.flushHeaders();
    const { retryMs, keepAliveMs } = this.options;
    const retry = retryMs === undefined ? "" : `retry: ${retryMs}\n`;
    if (primingId !== undefined) this.write(`id: ${primingId}\n${retry}data: \n\n`);
    else if (retry) this.write(`${retry}\n`);
    if (keepAliveMs !== undefined) {
      this.keepAlive = setInterval(() => {
        if (this.ready) this.write(":\n\n");
      }, keepAliveMs);
      this.keepAlive.unref();
    }
  }

  /** Writes framed events (`sseEvent`, `framed`). */
  write(text: string | Buffer): void {
    if (this.ended || this.res.writableEnded) return;
    if (this.res.write(text)) return;
    this.waiting = true;
    const { stallMs } = this.options;
    if (stallMs !== undefined) this.stall = setTimeout(() => this.res.destroy(), stallMs).unref();
    this.res.once("drain", () => {
      clearTimeout(this.stall);
      this.waiting = false;
      this.options.onDrain?.();
    });
  }

  onClose(handler: () => void): void {
    if (this.ended) handler();
    else this.closeHandlers.push(handler);
  }

  /** Ends the body cleanly: the client sees the stream finish. */
  end(): void {
    if (this.ended) return;
    this.res.end();
    this.finish();
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.keepAlive);
    clearTimeout(this.stall);
    for (const handler of this.closeHandlers.splice(0)) handler();
  }
}

// ---- the /v2/rpc connection stream ------------------------------------------------------------

/** Largest amount of event data put into one socket write. */
export const WRITE_BATCH_BYTES = 64 * 1024;

const DATA_FIELD = "\ndata: ";
const NEWLINE = 10;

/**
 * The event fields of one stream: `id: <event id>\ndata: ` of the next event it frames (`next`),
 * kept from one batch to the next, where the seq is counted up in place: a stream's batches are
 * consecutive, so a steady turn's one or two batches make no fields at all (a template string and
 * its `Buffer.from` per batch, ~1–2 µs a turn, most of what framed a one-event batch).
 */
interface StreamFields {
  /** `id: ` and the connection's event-id prefix. */
  readonly idStart: string;
  /** The fields before event `next`'s data. */
  bytes: Uint8Array;
  next: number;
}

function streamFields(idStart: string): StreamFields {
  return { idStart, bytes: new Uint8Array(0), next: -1 };
}

/**
 * A batch framed as SSE events (`id: <event id>\ndata: <event>\n\n` each), built as one Buffer
 * from the log's bytes: framing strings instead (each event decoded from the log, the framed text
 * then scanned for its UTF-8 length by node:http and the access log, and encoded again by the
 * socket write) cost more than the rest of the SSE path. The fields before each event
 * (`StreamFields`) are copied with one `set`, and the event with another: `Buffer#copy` validates
 * its arguments and makes a view per call, which took twice as long, and a byte-by-byte loop over
 * the ~30 bytes of fields ~2× as long as the `set` of a plain `Uint8Array` (a Buffer as the source
 * is slower again).
 */
function framed(stream: StreamFields, batch: EventBatch): Buffer {
  const count = batchLength(batch);
  const { buffers, starts, ends } = batch;
  const { idStart } = stream;
  let fields = batch.first === stream.next ? stream.bytes : eventFields(idStart, batch.first);
  const longestFields = idStart.length + String(batch.first + count - 1).length + DATA_FIELD.length;
  const out = Buffer.allocUnsafe(batch.bytes + count * (longestFields + 2));
  let at = 0;
  // A batch's events are mostly in one or two buffers: their `buffer` and `byteOffset` are read
  // once each (the `buffer` getter is a call into the runtime, not an inlined load).
  let buf: Buffer | undefined;
  let arrayBuffer: ArrayBufferLike = out.buffer;
  let offset = 0;
  for (let i = 0; i < count; i++) {
    out.set(fields, at);
    at += fields.length;
    if (buffers[i] !== buf) {
      buf = buffers[i]!;
      arrayBuffer = buf.buffer;
      offset = buf.byteOffset;
    }
    const start = starts[i]!;
    const length = ends[i]! - start;
    out.set(new Uint8Array(arrayBuffer, offset + start, length), at);
    at += length;
    out[at++] = NEWLINE;
    out[at++] = NEWLINE;
    if (!increment(fields, fields.length - DATA_FIELD.length))
      fields = eventFields(idStart, batch.first + i + 1);
  }
  stream.bytes = fields;
  stream.next = batch.first + count;
  return out.subarray(0, at);
}

/** The fields before event `seq`'s data. */
function eventFields(idStart: string, seq: number): Uint8Array {
  const bytes = Buffer.from(`${idStart}${seq}${DATA_FIELD}`, "latin1");
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
}

/**
 * Adds one to the decimal number that ends at `end` in `bytes` (an event id's seq: what precedes
 * it is no digit); false when it needs a digit more (the caller makes the fields again).
 */
function increment(bytes: Uint8Array, end: number): boolean {
  for (let i = end - 1; ; i--) {
    const digit = bytes[i]!;
    if (digit < 48 || digit > 57) return false;
    if (digit !== 57) {
      bytes[i] = digit + 1;
      return true;
    }
    bytes[i] = 48;
  }
}

export interface StreamLimits {
  keepAliveMs: number;
  retryMs: number;
}

/**
 * The connection's SSE stream: a priming event with the cursor's id, then every event after the
 * cursor as the reader yields it, written while the socket takes it. Ends when the runtime ends
 * the reader (another reader took over, or the connection ended and everything was read).
 */
export function streamConnection(
  res: ServerResponse,
  conn: Connection,
  cursor: number | undefined,
  limits: StreamLimits,
): void {
  const sse = new SseResponse(res, { ...limits, onDrain: () => pump() });
  const reader = conn.openReader(cursor, { readable: () => pump(), end: () => sse.end() });
  sse.onClose(() => reader.close());
  sse.open(eventId(conn.epoch, reader.cursor));
  const fields = streamFields(`id: ${eventIdPrefix(conn.epoch)}`);
  function pump(): void {
    while (sse.ready) {
      const batch = reader.read(WRITE_BATCH_BYTES);
      if (batch === undefined) break;
      sse.write(framed(fields, batch));
    }
    if (sse.ready && reader.finished) sse.end();
  }
  pump();
}

/**
 * A session-scoped GET (the SDK's `createHttpStream` opens one per session): an idle stream, since
 * everything travels on the connection stream; it ends with the connection.
 */
export function idleStream(res: ServerResponse, conn: Connection, limits: StreamLimits): void {
  const sse = new SseResponse(res, limits);
  sse.open();
  void conn.whenClosed.then(() => sse.end());
}
