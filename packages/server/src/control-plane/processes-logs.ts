import type { ServerResponse } from "node:http";
import { problems } from "../http/problem.js";
import { sendJson } from "../http/router.js";
import type { ManagedProcess, OutputReader, ProcessExit } from "../processes/managed-process.js";
import type { OutputEntry, OutputStream } from "../processes/output-log.js";
import { SseResponse, sseEvent } from "../transport/sse.js";

export type Encoding = "utf8" | "base64";

export interface LogsRequest {
  since?: number;
  /** Only with follow: the SSE reconnection cursor. */
  lastEventId?: string | string[];
  stream?: OutputStream;
  encoding: Encoding;
}

const KEEP_ALIVE_MS = 15_000;
const RETRY_MS = 1_000;

export function entryJson(entry: OutputEntry, encoding: Encoding) {
  return { seq: entry.seq, stream: entry.stream, offset: entry.offset, data: entry.data.toString(encoding) };
}

/**
 * Where a reader starts: after `Last-Event-ID`, else after `since`, else at the oldest output still
 * kept. A cursor whose output was dropped, or that this process never produced, is a 410, so a
 * client always learns that it missed something.
 */
function startCursor(proc: ManagedProcess, request: LogsRequest): number {
  const lastEventId = Array.isArray(request.lastEventId) ? request.lastEventId[0] : request.lastEventId;
  const named = lastEventId ?? request.since;
  if (named === undefined) return proc.log.oldestCursor;
  const cursor = typeof named === "number" ? named : Number(named);
  if (!/^\d{1,15}$/.test(String(named)))
    throw problems.badRequest(`Malformed Last-Event-ID ${JSON.stringify(named)}: send the id of an event.`);
  if (cursor < proc.log.oldestCursor)
    throw problems.gone(
      `Output after seq ${cursor} was dropped (the log keeps the last maxLogBytes); read from seq ${proc.log.oldestCursor}.`,
      { oldestSeq: proc.log.oldestCursor },
    );
  if (cursor > proc.finalSeq || (cursor === proc.finalSeq && proc.running))
    throw problems.gone(`Process ${proc.id} has produced no event ${cursor}.`);
  return cursor;
}

/** `GET …/logs` without `follow`: the kept output after the cursor, as JSON. */
export function sendLogs(res: ServerResponse, proc: ManagedProcess, request: LogsRequest): void {
  const cursor = startCursor(proc, request);
  const entries = proc.log
    .after(cursor)
    .filter((e) => request.stream === undefined || e.stream === request.stream);
  const info = proc.info();
  sendJson(res, 200, {
    entries: entries.map((e) => entryJson(e, request.encoding)),
    encoding: request.encoding,
    lastSeq: proc.log.lastSeq,
    droppedBytes: proc.log.droppedBytes,
    status: info.status,
    exitCode: info.exitCode,
    signal: info.signal,
  });
}

/** `GET …/logs?follow=true`: server-sent events until the process exits and its output is delivered. */
export function followLogs(
  res: ServerResponse,
  proc: ManagedProcess,
  request: LogsRequest,
  stallMs: number,
): void {
  const cursor = startCursor(proc, request);
  // Everything up to the exit event was seen: 204 also tells an EventSource to stop reconnecting.
  if (cursor === proc.finalSeq) {
    res.writeHead(204).end();
    return;
  }
  const follower = new SseFollower(res, cursor, request, stallMs, () => proc.pump(follower));
  res.once("close", () => proc.detach(follower));
  proc.attach(follower);
}

/**
 * One follower as an SSE response: `output` events `{seq, stream, offset, data}` with `id: <seq>`,
 * then one `exit` event `{exitCode, signal}` with id `lastSeq + 1`, then the end of the response.
 * Written pull-style: not ready while the socket is full; a follower stuck for `stallMs` is dropped.
 */
class SseFollower implements OutputReader {
  private readonly sse: SseResponse;

  constructor(
    res: ServerResponse,
    public cursor: number,
    private readonly request: LogsRequest,
    stallMs: number,
    onDrain: () => void,
  ) {
    this.sse = new SseResponse(res, { keepAliveMs: KEEP_ALIVE_MS, retryMs: RETRY_MS, stallMs, onDrain });
    this.sse.open();
  }

  get ready(): boolean {
    return this.sse.ready;
  }

  deliver(entries: OutputEntry[]): void {
    let text = "";
    for (const { seq, stream, offset, data } of entries) {
      if (this.request.stream !== undefined && stream !== this.request.stream) continue;
      // The JSON is written by hand: base64 needs no escaping, and JSON.stringify's scan of a
      // large string costs several times the encoding itself (measured: 6x for 8 KiB chunks).
      const value =
        this.request.encoding === "base64"
          ? `"${data.toString("base64")}"`
          : JSON.stringify(data.toString("utf8"));
      const json = `{"seq":${seq},"stream":"${stream}","offset":${offset},"data":${value}}`;
      text += sseEvent(json, String(seq), "output");
    }
    if (text) this.sse.write(text);
  }

  end(exit: ProcessExit, finalSeq: number): void {
    this.sse.write(sseEvent(JSON.stringify(exit), String(finalSeq), "exit"));
    this.sse.end();
  }
}
