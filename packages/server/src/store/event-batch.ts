/**
 * Consecutive events as the UTF-8 bytes the log holds them in: event `first + i` is
 * `buffers[i]` from `starts[i]` to `ends[i]`. The buffers are views of the replay window's slabs
 * (or of the chunk every log reads the disk into), so a batch is valid only until the log is
 * appended to or trimmed again, or any log is read: a transport copies or decodes it before it
 * returns. Handing out bytes rather than strings
 * lets the SSE transport frame a batch with copies alone: decoding each event to a string and
 * encoding the framed text again (with two UTF-8 length scans in between, node:http's and the
 * access log's) was about a fifth of the server's CPU per streamed event.
 */
export interface EventBatch {
  first: number;
  buffers: Buffer[];
  starts: number[];
  ends: number[];
  /** The events' bytes, all together. */
  bytes: number;
}

export function emptyBatch(first: number): EventBatch {
  return { first, buffers: [], starts: [], ends: [], bytes: 0 };
}

export function pushEvent(batch: EventBatch, buf: Buffer, start: number, end: number): void {
  batch.buffers.push(buf);
  batch.starts.push(start);
  batch.ends.push(end);
  batch.bytes += end - start;
}

/** How many events the batch holds. */
export function batchLength(batch: EventBatch): number {
  return batch.starts.length;
}

/** Event `i` of the batch as a Buffer of its own (a copy: the batch's bytes are only lent). */
export function eventBytes(batch: EventBatch, i: number): Buffer {
  const buf = batch.buffers[i]!;
  const start = batch.starts[i]!;
  const length = batch.ends[i]! - start;
  const copy = Buffer.allocUnsafe(length);
  copy.set(new Uint8Array(buf.buffer, buf.byteOffset + start, length));
  return copy;
}
