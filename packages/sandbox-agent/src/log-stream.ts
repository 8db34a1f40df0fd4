import { sseItems } from "acp-http-client";
import { SandboxAgentHttpError } from "./errors.js";
import type { HttpTransport } from "./http.js";
import { decodeEntry, type LogEntry, type OutputStream } from "./processes.js";

/** What following a process' output yields: its chunks in order, then its exit. */
export type LogEvent =
  ({ type: "output" } & LogEntry) | { type: "exit"; exitCode: number | null; signal: string | null };

export interface FollowOptions {
  /** Start after this `seq` (default: the oldest output the server still has). */
  since?: number;
  /** Only this stream (default both). */
  stream?: OutputStream;
  /** Ends the iteration. */
  signal?: AbortSignal;
  /** Consecutive failed reconnects before giving up (default 5). */
  maxReconnects?: number;
  /** A stream silent this long (the server sends a keep-alive every 15 s) is reconnected (default 45 s). */
  idleTimeoutMs?: number;
}

const RETRY_MS = 1_000;

/**
 * Follows `GET …/logs?follow=true`: yields chunks as the server sends them and reconnects with
 * `Last-Event-ID` when the connection drops, so nothing is missed or repeated. The body is read
 * only as fast as the caller iterates (the server then holds the process back). Ends after the
 * `exit` event; throws `SandboxAgentHttpError` (410) if output was dropped before it was read.
 */
export async function* followLogs(
  http: HttpTransport,
  path: string,
  options: FollowOptions,
): AsyncGenerator<LogEvent> {
  let cursor = options.since === undefined ? undefined : String(options.since);
  let retryMs = RETRY_MS;
  let failures = 0;
  for (;;) {
    let response: Response;
    try {
      response = await http.send({
        method: "GET",
        path,
        query: { follow: true, stream: options.stream, encoding: "base64" },
        headers: {
          accept: "text/event-stream",
          ...(cursor !== undefined ? { "last-event-id": cursor } : {}),
        },
        signal: options.signal,
      });
    } catch (error) {
      if (error instanceof SandboxAgentHttpError || options.signal?.aborted) throw error;
      if (++failures > (options.maxReconnects ?? 5)) throw error;
      await delay(retryMs * failures);
      continue;
    }
    if (response.status === 204 || !response.body) return; // everything up to the exit was seen
    try {
      for await (const item of sseItems(response.body, options.idleTimeoutMs ?? 45_000)) {
        if ("retry" in item) {
          retryMs = item.retry;
          continue;
        }
        const { event } = item;
        if (event.id) cursor = event.id;
        failures = 0;
        if (event.event === "output") yield { type: "output", ...decodeEntry(JSON.parse(event.data)) };
        if (event.event === "exit") {
          yield {
            type: "exit",
            ...(JSON.parse(event.data) as { exitCode: number | null; signal: string | null }),
          };
          return;
        }
      }
    } catch (error) {
      if (options.signal?.aborted) throw error;
      if (++failures > (options.maxReconnects ?? 5)) throw error;
    }
    await delay(retryMs);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
