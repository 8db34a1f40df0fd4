/** Tunables of the process API (`/v2/processes`); the config file's `processes` object sets them. */
export interface ProcessLimits {
  /** Processes running at once (background, terminals, `run`, ACP terminals); more is a 429. */
  maxProcesses: number;
  /** Exited processes kept with their logs until DELETE; past it the oldest exited one is forgotten. */
  maxExitedProcesses: number;
  /** `run` timeout when the request names none… */
  runTimeoutMs: number;
  /** …and the largest `timeoutMs` a request may ask for. */
  maxRunTimeoutMs: number;
  /** `run` output kept per stream when the request names no `maxOutputBytes`… */
  runOutputBytes: number;
  /** …and the largest `maxOutputBytes` a request may ask for. */
  maxRunOutputBytes: number;
  /** Output kept per background process (stdout and stderr together); older output is dropped. */
  maxLogBytes: number;
  /** Terminal output replayed to a WebSocket viewer when it attaches. */
  scrollbackBytes: number;
  /** Bytes one input request (or one WebSocket message) may carry; more is a 413. */
  maxInputBytes: number;
  /** Grace between SIGTERM and SIGKILL for `stop` and server shutdown. */
  killGraceMs: number;
  /** A log follower or terminal viewer that makes no progress this long is disconnected. */
  stallMs: number;
  /** Lifetime of a terminal WebSocket ticket. */
  ticketTtlMs: number;
}

const MiB = 1024 * 1024;

export const DEFAULT_PROCESS_LIMITS: ProcessLimits = {
  maxProcesses: 64,
  maxExitedProcesses: 64,
  runTimeoutMs: 60_000,
  maxRunTimeoutMs: 60 * 60_000,
  runOutputBytes: MiB,
  maxRunOutputBytes: 64 * MiB,
  maxLogBytes: 16 * MiB,
  scrollbackBytes: 256 * 1024,
  maxInputBytes: MiB,
  killGraceMs: 2_000,
  stallMs: 60_000,
  ticketTtlMs: 30_000,
};
