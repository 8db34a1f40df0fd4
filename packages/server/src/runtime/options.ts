/** Tunables of the ACP runtime; every one is a CLI flag or config key. */
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
  /** How long an ended connection (agent exited) stays readable before its id answers 404. */
  endedRetentionMs: number;
}

export const DEFAULT_LIMITS: RuntimeLimits = {
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
};
