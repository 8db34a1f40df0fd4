import { createParser, type EventSourceMessage } from "eventsource-parser";

export interface SseEvent {
  id: string | undefined;
  event: string | undefined;
  data: string;
}

/**
 * Yields the events of an SSE response body as they arrive. Comments are reported with
 * `event: "comment"` so tests can observe keep-alives; `retry:` values with `event: "retry"`.
 */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const queue: SseEvent[] = [];
  const parser = createParser({
    onEvent: (e: EventSourceMessage) => queue.push({ id: e.id, event: e.event, data: e.data }),
    onComment: (c: string) => queue.push({ id: undefined, event: "comment", data: c }),
    onRetry: (ms: number) => queue.push({ id: undefined, event: "retry", data: String(ms) }),
  });
  const decoder = new TextDecoder();
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
      while (queue.length) yield queue.shift()!;
    }
  } finally {
    reader.releaseLock();
  }
}
