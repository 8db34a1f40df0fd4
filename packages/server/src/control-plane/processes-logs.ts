import type { ServerResponse } from "node:http";
import { problems } from "../http/problem.js";
import { sendJson } from "../http/router.js";
import type { ManagedProcess, OutputReader, ProcessExit } from "../processes/managed-process.js";
import type { OutputEntry, OutputStream } from "../processes/output-log.js";

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
  private waiting = false;
  private readonly keepAlive: NodeJS.Timeout;
  private stall: NodeJS.Timeout | undefined;

  constructor(
    private readonly res: ServerResponse,
    public cursor: number,
    private readonly request: LogsRequest,
    private readonly stallMs: number,
    private readonly onDrain: () => void,
  ) {
    const headers: Record<string, string> = {
      "content-type": "text/event-stream",
      "cache-control": "no-cache, no-transform",
      "x-accel-buffering": "no",
    };
    if (res.req.httpVersionMajor === 1) headers.connection = "keep-alive";
    res.writeHead(200, headers);
    this.write(`retry: ${RETRY_MS}\n\n`);
    this.keepAlive = setInterval(() => this.ready && this.write(":\n\n"), KEEP_ALIVE_MS).unref();
    res.once("close", () => {
      clearInterval(this.keepAlive);
      clearTimeout(this.stall);
    });
  }

  get ready(): boolean {
    return !this.waiting && !this.res.writableEnded && !this.res.destroyed;
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
      text += `id: ${seq}\nevent: output\ndata: {"seq":${seq},"stream":"${stream}","offset":${offset},"data":${value}}\n\n`;
    }
    if (text) this.write(text);
  }

  end(exit: ProcessExit, finalSeq: number): void {
    this.write(`id: ${finalSeq}\nevent: exit\ndata: ${JSON.stringify(exit)}\n\n`);
    this.res.end();
  }

  private write(text: string): void {
    if (this.res.write(text)) return;
    this.waiting = true;
    this.stall = setTimeout(() => this.res.destroy(), this.stallMs).unref();
    this.res.once("drain", () => {
      clearTimeout(this.stall);
      this.waiting = false;
      this.onDrain();
    });
  }
}
