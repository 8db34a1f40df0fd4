/**
 * Processes and terminals inside the sandbox (`/v2/processes`): run a command to completion,
 * start background processes, feed their stdin, read or follow their output, open a terminal.
 */
import type { HttpTransport } from "./http.js";
import { followLogs, type LogEvent, type FollowOptions } from "./log-stream.js";
import { openTerminal, type Terminal, type TerminalOptions } from "./terminal.js";

export interface CommandOptions {
  /** Program to run, looked up in PATH; no shell (use `sh` with `["-c", line]` for a command line). */
  command: string;
  args?: string[];
  /** Working directory inside the sandbox; relative to the server's --workdir (the default). */
  cwd?: string;
  /** Added to the server's minimal base environment (host secrets are not passed on). */
  env?: Record<string, string>;
}

export interface RunOptions extends CommandOptions {
  /** Written to stdin, which is then closed (closed at once without it). */
  stdin?: string | Uint8Array;
  /** Kill the process group after this long (server default 60 s). */
  timeoutMs?: number;
  /** Bytes kept per stream (server default 1 MiB); the rest is dropped and `truncated` set. */
  maxOutputBytes?: number;
  /** Return stdout and stderr as bytes instead of UTF-8 text. */
  binary?: boolean;
  signal?: AbortSignal;
}

export interface RunResult<Output extends string | Uint8Array = string> {
  exitCode: number | null;
  signal: string | null;
  stdout: Output;
  stderr: Output;
  truncated: boolean;
  timedOut: boolean;
  durationMs: number;
}

export interface CreateOptions extends CommandOptions {
  /** Run on a pseudo-terminal (stdout and stderr are the terminal); open it with `terminal(id)`. */
  tty?: boolean;
  cols?: number;
  rows?: number;
}

export interface ProcessInfo {
  id: string;
  command: string;
  args: string[];
  cwd: string;
  tty: boolean;
  cols: number | null;
  rows: number | null;
  /** `acp`: a terminal an agent started through the server (`serveClientCapabilities`). */
  source: "api" | "acp";
  status: "running" | "exited";
  pid: number;
  exitCode: number | null;
  signal: string | null;
  stdinOpen: boolean;
  createdAt: string;
  exitedAt: string | null;
  stdoutBytes: number;
  stderrBytes: number;
}

export type OutputStream = "stdout" | "stderr";

/** One chunk of output; `seq` orders both streams, `offset` is its byte position in its stream. */
export interface LogEntry {
  seq: number;
  stream: OutputStream;
  offset: number;
  data: Uint8Array;
}

export interface LogsOptions {
  /** Only chunks after this `seq`. */
  since?: number;
  /** Only this stream (default both). */
  stream?: OutputStream;
  signal?: AbortSignal;
}

export interface LogsResult {
  entries: LogEntry[];
  /** Pass as `since` to get only what comes next. */
  lastSeq: number;
  /** Oldest output the server dropped (it keeps the last `maxLogBytes` per process). */
  droppedBytes: number;
  status: "running" | "exited";
  exitCode: number | null;
  signal: string | null;
}

interface WireEntry {
  seq: number;
  stream: OutputStream;
  offset: number;
  data: string;
}

/** A chunk as the server sends it (base64) → bytes. */
export function decodeEntry(entry: WireEntry): LogEntry {
  return { seq: entry.seq, stream: entry.stream, offset: entry.offset, data: fromBase64(entry.data) };
}

/** Node's Buffer when there is one: its base64 codec is native, where atob is a JS loop per byte. */
const NodeBuffer = (globalThis as { Buffer?: typeof Buffer }).Buffer;

export function fromBase64(text: string): Uint8Array {
  if (NodeBuffer) {
    const bytes = NodeBuffer.from(text, "base64");
    return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length); // a plain Uint8Array, no copy
  }
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function toBase64(data: string | Uint8Array): string {
  if (NodeBuffer)
    return (typeof data === "string" ? NodeBuffer.from(data, "utf8") : NodeBuffer.from(data)).toString(
      "base64",
    );
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000)
    binary += String.fromCharCode(...bytes.subarray(i, Math.min(i + 0x8000, bytes.length)));
  return btoa(binary);
}

const path = (id: string, rest = "") => `/v2/processes/${encodeURIComponent(id)}${rest}`;

export class Processes {
  constructor(private readonly http: HttpTransport) {}

  /** Runs a command to completion and returns its exit status and output. */
  run(options: RunOptions & { binary: true }): Promise<RunResult<Uint8Array>>;
  run(options: RunOptions): Promise<RunResult<string>>;
  async run(options: RunOptions): Promise<RunResult<string | Uint8Array>> {
    const { stdin, binary, signal, ...rest } = options;
    const body = await this.http.json<RunResult & { encoding: string }>({
      method: "POST",
      path: "/v2/processes/run",
      json: { ...rest, encoding: "base64", ...(stdin !== undefined ? { stdin: toBase64(stdin) } : {}) },
      signal,
    });
    const decode = (text: string) => (binary ? fromBase64(text) : new TextDecoder().decode(fromBase64(text)));
    const { encoding: _encoding, ...result } = body;
    return { ...result, stdout: decode(body.stdout), stderr: decode(body.stderr) };
  }

  /** Starts a background process (on a pseudo-terminal with `tty`). */
  create(options: CreateOptions): Promise<ProcessInfo> {
    return this.http.json<ProcessInfo>({ method: "POST", path: "/v2/processes", json: options });
  }

  async list(): Promise<ProcessInfo[]> {
    return (await this.http.json<{ processes: ProcessInfo[] }>({ method: "GET", path: "/v2/processes" }))
      .processes;
  }

  get(id: string): Promise<ProcessInfo> {
    return this.http.json<ProcessInfo>({ method: "GET", path: path(id) });
  }

  /** Writes to stdin (a terminal's keyboard); resolves once the process' pipe took it. `eof` closes stdin. */
  input(id: string, data: string | Uint8Array, options: { eof?: boolean } = {}): Promise<ProcessInfo> {
    return this.http.json<ProcessInfo>({
      method: "POST",
      path: path(id, "/input"),
      json: { data: toBase64(data), encoding: "base64", eof: options.eof ?? false },
    });
  }

  /** SIGTERM (SIGKILL after the server's grace period); resolves with the exited process. */
  stop(id: string): Promise<ProcessInfo> {
    return this.http.json<ProcessInfo>({ method: "POST", path: path(id, "/stop") });
  }

  /** SIGKILL; resolves with the exited process. */
  kill(id: string): Promise<ProcessInfo> {
    return this.http.json<ProcessInfo>({ method: "POST", path: path(id, "/kill") });
  }

  /** Kills the process if it runs, and forgets it and its output. */
  async remove(id: string): Promise<void> {
    await this.http.json({ method: "DELETE", path: path(id) });
  }

  /** Sets a terminal's window size. */
  resize(id: string, size: { cols: number; rows: number }): Promise<ProcessInfo> {
    return this.http.json<ProcessInfo>({ method: "POST", path: path(id, "/terminal/resize"), json: size });
  }

  /**
   * The output kept so far; with `follow: true`, an async iterator of `output` events and a final
   * `exit` event that reconnects by itself after a dropped connection without losing a byte.
   */
  logs(id: string, options: FollowOptions & { follow: true }): AsyncIterableIterator<LogEvent>;
  logs(id: string, options?: LogsOptions & { follow?: false }): Promise<LogsResult>;
  logs(
    id: string,
    options: (LogsOptions | FollowOptions) & { follow?: boolean } = {},
  ): Promise<LogsResult> | AsyncIterableIterator<LogEvent> {
    if (options.follow) return followLogs(this.http, path(id, "/logs"), options);
    return this.snapshot(id, options);
  }

  /** Opens the terminal of a `tty` process: a duplex over a WebSocket. */
  terminal(id: string, options: TerminalOptions = {}): Promise<Terminal> {
    return openTerminal(this.http, path(id), options);
  }

  private async snapshot(id: string, options: LogsOptions): Promise<LogsResult> {
    const { encoding: _encoding, ...body } = await this.http.json<
      Omit<LogsResult, "entries"> & { entries: WireEntry[]; encoding: string }
    >({
      method: "GET",
      path: path(id, "/logs"),
      query: { since: options.since, stream: options.stream, encoding: "base64" },
      signal: options.signal,
    });
    return { ...body, entries: body.entries.map(decodeEntry) };
  }
}
