/** Tunables of the server; every one is a key of the config file's `limits`. */
export interface RuntimeLimits {
  /** Largest POST body. */
  maxBodyBytes: number;
  /** Largest single line accepted from an agent's stdout. */
  maxMessageBytes: number;
  /** Undelivered outbound bytes per connection before the agent's stdout is paused. */
  maxBufferedBytes: number;
  /** Delivered events kept for replay: count and bytes. */
  replayEvents: number;
  replayBytes: number;
  /** Close a connection whose output stays blocked (full buffer, no reader progress) this long. */
  stallMs: number;
  /** Close a connection with no SSE reader and no requests for this long. */
  idleMs: number;
  /** SSE keep-alive comment interval. */
  keepAliveMs: number;
  /** SSE `retry:` hint sent with every priming event. */
  retryMs: number;
  /** Time for an agent to answer `initialize`. */
  initializeTimeoutMs: number;
  /** Grace between stdin close, SIGTERM and SIGKILL. */
  killGraceMs: number;
  /** How long an ended connection (agent exited, or closed by the server) answers 410 before its id answers 404. */
  endedRetentionMs: number;
  /** Live ACP connections, that is agent processes (starting, running or still stopping); beyond it `initialize` is a 503. */
  maxConnections: number;
  /** Open client sockets (HTTP/1.1 and HTTP/2); beyond it a new socket gets a 503 and is closed. */
  maxSockets: number;
  /** Open streams on one HTTP/2 socket; beyond it a stream gets a 503 (see `http/h2c.ts`). */
  maxStreamsPerSocket: number;
  /** Time for a new socket to send its first bytes, and for any request to send its headers (408 after). */
  headersTimeoutMs: number;
  /** Time to receive a whole request, headers and body (408 after); responses such as SSE streams are not bounded. */
  requestTimeoutMs: number;
}

/** Limits whose default depends on the machine: derived from the descriptor limit at start (`descriptors.ts`). */
export type DescriptorLimit = "maxConnections" | "maxSockets";

/** Defaults of every limit but those derived from the descriptor limit. */
export const DEFAULT_LIMITS: Omit<RuntimeLimits, DescriptorLimit> = {
  maxBodyBytes: 16 * 1024 * 1024,
  maxMessageBytes: 32 * 1024 * 1024,
  maxBufferedBytes: 16 * 1024 * 1024,
  replayEvents: 10_000,
  replayBytes: 16 * 1024 * 1024,
  stallMs: 60_000,
  idleMs: 10 * 60_000,
  keepAliveMs: 15_000,
  retryMs: 1_000,
  initializeTimeoutMs: 60_000,
  killGraceMs: 2_000,
  endedRetentionMs: 60_000,
  headersTimeoutMs: 30_000,
  requestTimeoutMs: 300_000,
  maxStreamsPerSocket: 128,
};

/** Every key of `RuntimeLimits`, for the config file's schema. */
export const LIMIT_NAMES: ReadonlyArray<keyof RuntimeLimits> = [
  ...(Object.keys(DEFAULT_LIMITS) as Array<keyof typeof DEFAULT_LIMITS>),
  "maxConnections",
  "maxSockets",
];
