import { connect } from "node:net";
import http2 from "node:http2";
import type { RunningServer } from "@sandbox-agent/testkit";
import { LIVE_CONNECTION, LIVE_SESSION, type FuzzCase } from "./fuzz-gen.js";
import { problemDefect, rawExchange, type RawResponse } from "./raw-http.js";
import { RawConnection, type SseReader } from "./rpc.js";

/** How long a case may wait for its answer (an unfinished request is never answered). */
const CASE_TIMEOUT_MS = 1500;

/** An answer the server should not have given. */
export interface Finding {
  kind: string;
  request: string;
  status: number;
  defect: string;
}

interface Answer {
  status: number;
  contentType: string | undefined;
  body: Buffer;
  complete: boolean;
}

interface Live {
  conn: RawConnection;
  sse: SseReader;
  sessionId: string;
}

export function describeBytes(bytes: Buffer | string): string {
  const text = typeof bytes === "string" ? bytes : bytes.toString("latin1");
  return JSON.stringify(text.length > 300 ? `${text.slice(0, 300)}… (${text.length} bytes)` : text);
}

/**
 * Sends fuzz cases to a server and judges every answer: no 5xx, and every error problem+json.
 * JSON-RPC cases go to a live mock-agent connection, reopened when a case ends its agent.
 */
export class FuzzRun {
  readonly findings: Finding[] = [];
  readonly counts = new Map<string, number>();
  readonly statuses = new Map<number, number>();
  /** The last requests sent, to name the culprit if the server dies. */
  readonly recent: string[] = [];
  private live: Live | undefined;
  private reopening: Promise<void> | undefined;

  constructor(
    private readonly server: RunningServer,
    private readonly concurrency: number,
  ) {}

  get total(): number {
    return [...this.counts.values()].reduce((a, b) => a + b, 0);
  }

  async open(): Promise<void> {
    this.live = await openLive(this.server);
  }

  close(): void {
    this.live?.sse.close();
  }

  async run(fuzzCase: FuzzCase): Promise<void> {
    this.counts.set(fuzzCase.kind, (this.counts.get(fuzzCase.kind) ?? 0) + 1);
    if (fuzzCase.transport === "http1") {
      const bytes = this.substitute(fuzzCase.bytes);
      this.sent(fuzzCase.kind, bytes);
      const timeoutMs = fuzzCase.timeoutMs ?? CASE_TIMEOUT_MS;
      const options = { timeoutMs, end: !fuzzCase.keepOpen, pieces: fuzzCase.pieces };
      const responses = await rawExchange(this.server.port, bytes, options);
      this.judge(fuzzCase.kind, bytes, responses.map(answerOf));
      return this.afterwards(responses);
    }
    if (fuzzCase.transport === "h2c-raw") {
      this.sent(fuzzCase.kind, fuzzCase.bytes);
      return sendAndForget(this.server.port, fuzzCase.bytes);
    }
    const { spec } = fuzzCase;
    const headers: http2.OutgoingHttpHeaders = { ":method": spec.method, ":path": spec.target };
    for (const [name, value] of Object.entries(fuzzCase.headers)) headers[name] = this.substitute(value);
    const body = this.substitute(spec.body);
    const request = `h2 ${spec.method} ${spec.target}\n${body}`;
    this.sent(fuzzCase.kind, request);
    const answer = await h2Exchange(this.server.baseUrl, headers, body);
    this.judge(fuzzCase.kind, request, answer ? [answer] : []);
  }

  private substitute<T extends Buffer | string>(data: T): T {
    const live = this.live!;
    const replace = (text: string) =>
      text.replaceAll(LIVE_CONNECTION, live.conn.id).replaceAll(LIVE_SESSION, live.sessionId);
    if (typeof data === "string") return replace(data) as T;
    const text = data.toString("latin1");
    if (!text.includes(LIVE_CONNECTION) && !text.includes(LIVE_SESSION)) return data;
    return Buffer.from(replace(text), "latin1") as T;
  }

  /** Cleans up after a case: deletes a connection an initialize created, replaces an ended live one. */
  private async afterwards(responses: RawResponse[]): Promise<void> {
    const created = responses.find((r) => r.status === 200)?.headers.get("acp-connection-id");
    if (created && created !== this.live!.conn.id) {
      await fetch(`${this.server.baseUrl}/v2/rpc`, {
        method: "DELETE",
        headers: { "acp-connection-id": created },
      });
    }
    if (responses.some((r) => r.status === 410)) await this.reopen();
  }

  private reopen(): Promise<void> {
    this.reopening ??= openLive(this.server).then((next) => {
      this.live!.sse.close();
      this.live = next;
      this.reopening = undefined;
    });
    return this.reopening;
  }

  private sent(kind: string, request: Buffer | string): void {
    this.recent.push(`${kind} ${describeBytes(request)}`);
    if (this.recent.length > this.concurrency * 2) this.recent.shift();
  }

  private judge(kind: string, request: Buffer | string, answers: Answer[]): void {
    const head = /^(h2 )?HEAD /.test(typeof request === "string" ? request : request.toString("latin1"));
    for (const answer of answers) {
      this.statuses.set(answer.status, (this.statuses.get(answer.status) ?? 0) + 1);
      const defect =
        answer.status < 0
          ? `not an HTTP response: ${describeBytes(answer.body)}`
          : answer.status >= 500
            ? `server error: ${answer.body.toString("utf8").slice(0, 500)}`
            : problemDefect(answer.status, answer.contentType, answer.body, answer.complete, head);
      if (defect)
        this.findings.push({ kind, request: describeBytes(request), status: answer.status, defect });
    }
  }
}

function answerOf(response: RawResponse): Answer {
  const { status, body, complete } = response;
  return { status, contentType: response.headers.get("content-type"), body, complete };
}

async function openLive(server: RunningServer): Promise<Live> {
  const conn = await RawConnection.open(server);
  const sse = await conn.openSse();
  return { conn, sse, sessionId: await conn.newSession(sse) };
}

/** Writes bytes that have no answer to judge (e.g. an HTTP/2 preface then noise); waits for the close. */
function sendAndForget(port: number, bytes: Buffer): Promise<void> {
  return new Promise<void>((resolve) => {
    const socket = connect(port, "127.0.0.1", () => socket.end(bytes));
    socket.on("data", () => {});
    socket.on("error", () => resolve());
    socket.on("close", () => resolve());
    socket.setTimeout(CASE_TIMEOUT_MS, () => socket.destroy());
  });
}

/**
 * One request on a fresh h2c session; undefined when there was no answer (the session failed, or
 * node:http2 refused to send the request, e.g. an invalid header value).
 */
function h2Exchange(
  baseUrl: string,
  headers: http2.OutgoingHttpHeaders,
  body: string,
): Promise<Answer | undefined> {
  return new Promise((resolve) => {
    const session = http2.connect(baseUrl);
    const timer = setTimeout(() => session.destroy(), CASE_TIMEOUT_MS);
    let answer: Answer | undefined;
    session.on("error", () => {});
    session.on("close", () => {
      clearTimeout(timer);
      resolve(answer);
    });
    let stream: http2.ClientHttp2Stream;
    try {
      stream = session.request(headers);
    } catch {
      session.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    stream.on("response", (h) => {
      answer = {
        status: Number(h[":status"]),
        contentType: h["content-type"],
        body: Buffer.alloc(0),
        complete: false,
      };
    });
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("end", () => {
      if (answer) answer = { ...answer, body: Buffer.concat(chunks), complete: true };
    });
    stream.on("error", () => {});
    stream.on("close", () => session.close());
    // node:http2 ends the stream itself for methods without a body (GET, HEAD, DELETE…).
    if (stream.writable) stream.end(body);
  });
}
