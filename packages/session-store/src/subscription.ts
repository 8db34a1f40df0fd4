import type { EventSubscription, StoredEvent, SubscribeOptions } from "./types.js";

export interface EventPumpOptions {
  /** Reads the events after a sequence number, oldest first, at most `batchSize` of them. */
  read(after: number, limit: number): Promise<StoredEvent[]>;
  listener: (events: StoredEvent[]) => void | Promise<void>;
  after: number;
  onError: ((error: Error) => void) | undefined;
  batchSize?: number;
  onClose?: () => void;
}

const RETRY_MIN_MS = 50;
const RETRY_MAX_MS = 2000;

/**
 * One subscriber's delivery loop, shared by the drivers. A driver calls `wake(seq)` when it learns that
 * events up to `seq` exist (a notification), or `wake()` when it may have missed some (a reconnect):
 * the pump reads from its cursor, delivers each batch once, in order, one at a time, and retries reads
 * that fail. Delivering only what lies after the cursor is what makes a repeated or late wake harmless.
 */
export class EventPump implements EventSubscription {
  #cursor: number;
  #known = 0;
  #drain = true;
  #running = false;
  #closed = false;
  readonly #options: EventPumpOptions;
  readonly #batchSize: number;

  constructor(options: EventPumpOptions) {
    this.#options = options;
    this.#cursor = options.after;
    this.#batchSize = options.batchSize ?? 1000;
  }

  get cursor(): number {
    return this.#cursor;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Events up to `seq` exist; without `seq`, some may (read until there are none). */
  wake(seq?: number): void {
    if (seq === undefined) this.#drain = true;
    else if (seq > this.#known) this.#known = seq;
    if (!this.#running && !this.#closed) void this.#run();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#options.onClose?.();
  }

  async #run(): Promise<void> {
    this.#running = true;
    let delay = RETRY_MIN_MS;
    try {
      while (!this.#closed && (this.#drain || this.#cursor < this.#known)) {
        this.#drain = false;
        const known = this.#known;
        let batch: StoredEvent[];
        try {
          batch = await this.#options.read(this.#cursor, this.#batchSize);
          delay = RETRY_MIN_MS;
        } catch (error) {
          this.report(error);
          this.#drain = true;
          await new Promise((resolve) => setTimeout(resolve, delay));
          delay = Math.min(delay * 2, RETRY_MAX_MS);
          continue;
        }
        if (batch.length === 0) {
          // Appends commit before they notify: what was announced before this read is all visible, so
          // an empty read means there is nothing more until the next wake (unless one came meanwhile).
          if (this.#known === known) this.#known = this.#cursor;
          continue;
        }
        if (this.#closed) return;
        this.#cursor = batch[batch.length - 1]!.seq;
        if (batch.length === this.#batchSize) this.#drain = true;
        try {
          await this.#options.listener(batch);
        } catch (error) {
          this.report(error);
        }
      }
    } finally {
      this.#running = false;
    }
  }

  /** Passes an error to the subscriber's `onError` (drivers use it for their shared connection's errors). */
  report(error: unknown): void {
    this.#options.onError?.(error instanceof Error ? error : new Error(String(error)));
  }
}

/**
 * The subscriptions of one store, by session: what a driver calls when it learns of new events
 * (`wake`), after it may have missed some (`wakeAll`), or when its shared connection fails.
 */
export class Subscribers {
  readonly #bySession = new Map<string, Set<EventPump>>();

  /** Registers a pump for `sessionId` that reads with `read` (removed again when it closes); the caller wakes it. */
  add(
    sessionId: string,
    read: EventPumpOptions["read"],
    listener: EventPumpOptions["listener"],
    options: SubscribeOptions,
  ): EventPump {
    const pumps = this.#bySession.get(sessionId) ?? new Set();
    this.#bySession.set(sessionId, pumps);
    const pump: EventPump = new EventPump({
      read,
      listener,
      after: options.after ?? 0,
      onError: options.onError,
      onClose: () => {
        pumps.delete(pump);
        if (pumps.size === 0) this.#bySession.delete(sessionId);
      },
    });
    pumps.add(pump);
    return pump;
  }

  wake(sessionId: string, seq: number): void {
    for (const pump of this.#bySession.get(sessionId) ?? []) pump.wake(seq);
  }

  wakeAll(): void {
    for (const pump of this.#all()) pump.wake();
  }

  reportAll(error: Error): void {
    for (const pump of this.#all()) pump.report(error);
  }

  closeAll(): void {
    for (const pump of this.#all()) pump.close();
  }

  #all(): EventPump[] {
    return [...this.#bySession.values()].flatMap((pumps) => [...pumps]);
  }
}
