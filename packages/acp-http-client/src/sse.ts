import { createParser, type EventSourceMessage } from "eventsource-parser";

export interface SseHandlers {
  onEvent(event: EventSourceMessage): void;
  onRetry(ms: number): void;
}

/** One item of an SSE body: an event, or a `retry:` hint. */
export type SseItem = { event: EventSourceMessage } | { retry: number };

/**
 * The items of an SSE body, pulled: the body is read only as fast as the caller iterates, so a
 * slow consumer slows the server down instead of buffering. Throws when the body breaks, or when
 * a read waits `idleMs` without anything arriving (not even a keep-alive comment): a half-open
 * socket looks exactly like that. Time the caller spends between items does not count.
 */
export async function* sseItems(body: ReadableStream<Uint8Array>, idleMs: number): AsyncGenerator<SseItem> {
  const pending: SseItem[] = [];
  const parser = createParser({
    onEvent: (event) => void pending.push({ event }),
    onRetry: (retry) => void pending.push({ retry }),
  });
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let idle = false;
  try {
    for (;;) {
      const timer =
        idleMs > 0
          ? setTimeout(() => ((idle = true), void reader.cancel().catch(() => undefined)), idleMs)
          : undefined;
      const { done, value } = await reader.read().finally(() => clearTimeout(timer));
      if (idle) throw new Error(`acp-http-client: SSE stream silent for ${idleMs} ms`);
      if (done) return;
      parser.feed(decoder.decode(value, { stream: true }));
      yield* pending.splice(0);
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => undefined);
  }
}

/** Feeds an SSE body to `handlers` until the server ends it (see `sseItems`). */
export async function consumeSse(
  body: ReadableStream<Uint8Array>,
  handlers: SseHandlers,
  idleMs: number,
): Promise<void> {
  for await (const item of sseItems(body, idleMs)) {
    if ("event" in item) handlers.onEvent(item.event);
    else handlers.onRetry(item.retry);
  }
}
