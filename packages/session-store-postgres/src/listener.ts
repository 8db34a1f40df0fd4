import pg from "pg";

const RETRY_MIN_MS = 50;
const RETRY_MAX_MS = 2000;

export interface ListenerOptions {
  config: pg.ClientConfig;
  channels: readonly string[];
  onNotification(channel: string, payload: string): void;
  /** After every (re)connection, once LISTEN is in force: notifications may have been missed before it. */
  onListening(): void;
  onError(error: Error): void;
}

/**
 * One dedicated connection per store that LISTENs on the store's channels, started on first use. A
 * dropped connection (server restart, `pg_terminate_backend`, network) is reopened with backoff;
 * `onListening` then tells the subscribers to catch up from their cursors, which is what closes the
 * gap of notifications sent while nobody listened.
 */
export class Listener {
  #client: pg.Client | undefined;
  #listening = false;
  #started = false;
  #closed = false;
  #retryTimer: NodeJS.Timeout | undefined;
  #delay = RETRY_MIN_MS;
  readonly #options: ListenerOptions;

  constructor(options: ListenerOptions) {
    this.#options = options;
  }

  /** True while LISTEN is in force. */
  get listening(): boolean {
    return this.#listening;
  }

  start(): void {
    if (this.#started || this.#closed) return;
    this.#started = true;
    void this.#connect();
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#listening = false;
    clearTimeout(this.#retryTimer);
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => undefined);
  }

  async #connect(): Promise<void> {
    const client = new pg.Client(this.#options.config);
    this.#client = client;
    let lost = false;
    const drop = (error?: Error): void => {
      if (lost) return;
      lost = true;
      this.#listening = false;
      if (error) this.#options.onError(error);
      void client.end().catch(() => undefined);
      if (!this.#closed && this.#client === client) this.#retry();
    };
    client.on("error", drop);
    client.on("end", () => drop());
    client.on("notification", (message) =>
      this.#options.onNotification(message.channel, message.payload ?? ""),
    );
    try {
      await client.connect();
      for (const channel of this.#options.channels) await client.query(`LISTEN "${channel}"`);
    } catch (error) {
      drop(error as Error);
      return;
    }
    if (lost || this.#closed) return;
    this.#listening = true;
    this.#delay = RETRY_MIN_MS;
    this.#options.onListening();
  }

  #retry(): void {
    this.#retryTimer = setTimeout(() => void this.#connect(), this.#delay);
    this.#delay = Math.min(this.#delay * 2, RETRY_MAX_MS);
  }
}
