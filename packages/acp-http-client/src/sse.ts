import { createParser, type EventSourceMessage } from "eventsource-parser";

export interface SseHandlers {
  onEvent(event: EventSourceMessage): void;
  onRetry(ms: number): void;
}

/**
 * Feeds an SSE body through `eventsource-parser` until the server ends it.
 * Rejects when the body breaks, or when nothing (not even a keep-alive
 * comment) arrives for `idleMs`: a half-open socket looks exactly like that.
 */
export async function consumeSse(
  body: ReadableStream<Uint8Array>,
  handlers: SseHandlers,
  idleMs: number,
): Promise<void> {
  const parser = createParser({ onEvent: handlers.onEvent, onRetry: handlers.onRetry });
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let idle = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arm = (): void => {
    clearTimeout(timer);
    if (idleMs > 0)
      timer = setTimeout(() => ((idle = true), void reader.cancel().catch(() => undefined)), idleMs);
  };
  try {
    arm();
    for (;;) {
      const { done, value } = await reader.read();
      if (idle) throw new Error(`acp-http-client: SSE stream silent for ${idleMs} ms`);
      if (done) return;
      arm();
      parser.feed(decoder.decode(value, { stream: true }));
    }
  } finally {
    clearTimeout(timer);
    reader.releaseLock();
    await body.cancel().catch(() => undefined);
  }
}
