import { readSse, waitFor, type RunningServer, type SseEvent } from "@sandbox-agent/testkit";
import { WebSocket } from "ws";

export interface ProcessInfo {
  id: string;
  status: "running" | "exited";
  pid: number;
  tty: boolean;
  cols: number | null;
  rows: number | null;
  exitCode: number | null;
  signal: string | null;
  stdinOpen: boolean;
  source: string;
}

export interface Answer<T = Record<string, unknown>> {
  status: number;
  body: T;
}

/** The process API of a real server, called over HTTP with its token. */
export class ProcessApi {
  constructor(readonly server: RunningServer) {}

  async call<T = Record<string, unknown>>(method: string, path: string, body?: unknown): Promise<Answer<T>> {
    const response = await fetch(`${this.server.baseUrl}${path}`, {
      method,
      headers: this.server.headers(body === undefined ? {} : { "content-type": "application/json" }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : undefined) as T };
  }

  /** Starts a background process; fails the test unless it is created. */
  async create(body: Record<string, unknown>): Promise<ProcessInfo> {
    const answer = await this.call<ProcessInfo>("POST", "/v2/processes", body);
    if (answer.status !== 201)
      throw new Error(`create failed: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.body;
  }

  input(id: string, data: string, eof = false): Promise<Answer> {
    return this.call("POST", `/v2/processes/${id}/input`, { data, eof });
  }

  info(id: string): Promise<ProcessInfo> {
    return this.call<ProcessInfo>("GET", `/v2/processes/${id}`).then((a) => a.body);
  }

  /** Waits until the process has exited. */
  exited(id: string, timeoutMs = 10_000): Promise<ProcessInfo> {
    return waitFor(
      async () => {
        const info = await this.info(id);
        return info.status === "exited" ? info : undefined;
      },
      timeoutMs,
      `process ${id} to exit`,
    );
  }

  /** The logs as text (utf8), both streams in order. */
  async text(id: string): Promise<string> {
    const { body } = await this.call<{ entries: { data: string }[] }>("GET", `/v2/processes/${id}/logs`);
    return body.entries.map((e) => e.data).join("");
  }

  async follow(id: string, headers: Record<string, string> = {}, query = ""): Promise<LogFollower> {
    const controller = new AbortController();
    const response = await fetch(`${this.server.baseUrl}/v2/processes/${id}/logs?follow=true${query}`, {
      headers: this.server.headers(headers),
      signal: controller.signal,
    });
    return new LogFollower(response, controller);
  }

  /** Opens the terminal WebSocket (bearer token in the header unless `options` says otherwise). */
  terminal(id: string, options: { ticket?: string; headers?: Record<string, string> } = {}): TerminalClient {
    const url = new URL(`${this.server.baseUrl.replace(/^http/, "ws")}/v2/processes/${id}/terminal`);
    if (options.ticket) url.searchParams.set("ticket", options.ticket);
    const headers = options.headers ?? (options.ticket ? {} : this.server.headers());
    return new TerminalClient(new WebSocket(url, { headers }));
  }
}

/** A `logs?follow=true` response read in the background. */
export class LogFollower {
  readonly events: SseEvent[] = [];
  readonly done: Promise<void>;

  constructor(
    readonly response: Response,
    private readonly controller: AbortController,
  ) {
    this.done = (async () => {
      if (!response.body) return;
      try {
        for await (const event of readSse(response.body)) this.events.push(event);
      } catch {
        // cut by the test
      }
    })();
  }

  output(): Array<{ seq: number; stream: string; offset: number; data: string }> {
    return this.events.filter((e) => e.event === "output").map((e) => JSON.parse(e.data));
  }

  text(): string {
    return this.output()
      .map((e) => e.data)
      .join("");
  }

  exit(): { exitCode: number | null; signal: string | null } | undefined {
    const event = this.events.find((e) => e.event === "exit");
    return event ? JSON.parse(event.data) : undefined;
  }

  lastId(): string | undefined {
    return this.events.filter((e) => e.id !== undefined).at(-1)?.id;
  }

  until(predicate: () => unknown, what: string, timeoutMs = 10_000): Promise<unknown> {
    return waitFor(predicate, timeoutMs, `${what}; got ${JSON.stringify(this.text()).slice(-300)}`);
  }

  /** Cuts the connection, as a client that goes away would. */
  cut(): void {
    this.controller.abort();
  }
}

/** A terminal WebSocket: collects output bytes and control messages. */
export class TerminalClient {
  output = "";
  readonly messages: Array<Record<string, unknown>> = [];
  readonly opened: Promise<void>;
  readonly closed: Promise<{ code: number; reason: string }>;
  /** Status of a refused upgrade. */
  refused: number | undefined;

  constructor(readonly ws: WebSocket) {
    ws.on("message", (data: Buffer, isBinary) => {
      if (isBinary) this.output += data.toString("utf8");
      else this.messages.push(JSON.parse(data.toString("utf8")) as Record<string, unknown>);
    });
    this.opened = new Promise((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("unexpected-response", (_req, res) => {
        this.refused = res.statusCode;
        reject(new Error(`upgrade refused: ${res.statusCode}`));
      });
      ws.once("error", reject);
    });
    this.opened.catch(() => {});
    this.closed = new Promise((resolve) =>
      ws.once("close", (code, reason) => resolve({ code, reason: String(reason) })),
    );
  }

  type(text: string): void {
    this.ws.send(Buffer.from(text, "utf8"));
  }

  until(text: string | RegExp, timeoutMs = 10_000): Promise<unknown> {
    const matches = () => (typeof text === "string" ? this.output.includes(text) : text.test(this.output));
    return waitFor(
      matches,
      timeoutMs,
      `${String(text)} on the terminal; got ${JSON.stringify(this.output.slice(-300))}`,
    );
  }
}
