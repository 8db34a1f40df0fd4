import { readSse, type RunningServer, type SseEvent } from "@sandbox-agent/testkit";

export interface RpcMessage {
  jsonrpc: "2.0";
  id?: number | string | null;
  method?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown> & { stopReason?: string; sessionId?: string };
  error?: { code: number; message: string; data?: Record<string, unknown> };
}

/** An open SSE GET that collects events in the background so tests can wait for them. */
export class SseReader {
  readonly events: SseEvent[] = [];
  readonly done: Promise<void>;
  private waiters: Array<() => void> = [];
  private readonly parsed: RpcMessage[] = [];
  private parsedEvents = 0;
  constructor(
    readonly response: Response,
    private readonly controller: AbortController,
  ) {
    this.done = (async () => {
      try {
        for await (const event of readSse(response.body!)) {
          this.events.push(event);
          this.waiters.splice(0).forEach((w) => w());
        }
      } catch {
        // aborted or cut: the test decides what that means
      } finally {
        this.waiters.splice(0).forEach((w) => w());
      }
    })();
  }

  /** JSON-RPC messages received so far (priming events, comments and retry hints left out). */
  messages(): RpcMessage[] {
    return this.parseNew().slice();
  }

  /**
   * Parses the events that arrived since the last call, once each: `waitFor` runs at every event,
   * and re-parsing all of them each time made a long turn quadratic (3,000 chunks: 30 s of CPU).
   */
  private parseNew(): RpcMessage[] {
    for (; this.parsedEvents < this.events.length; this.parsedEvents++) {
      const e = this.events[this.parsedEvents]!;
      if (e.event !== "comment" && e.event !== "retry" && e.data !== "") this.parsed.push(JSON.parse(e.data));
    }
    return this.parsed;
  }

  /** Last event id seen, priming events included. */
  lastId(): string | undefined {
    return this.events.filter((e) => e.id !== undefined).at(-1)?.id;
  }

  async waitFor(predicate: (m: RpcMessage) => boolean, timeoutMs = 10_000): Promise<RpcMessage> {
    const deadline = Date.now() + timeoutMs;
    for (let checked = 0; ;) {
      const messages = this.parseNew();
      for (; checked < messages.length; checked++)
        if (predicate(messages[checked]!)) return messages[checked]!;
      if (Date.now() > deadline) {
        throw new Error(`timed out; got ${JSON.stringify(this.messages()).slice(0, 2000)}`);
      }
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 200);
      });
    }
  }

  /** Cuts the connection, as a client that goes away would. */
  close(): void {
    this.controller.abort();
  }
}

/** A raw HTTP ACP connection to the real server, speaking the transport by hand. */
export class RawConnection {
  private nextId = 1;
  private reader: SseReader | undefined;

  private constructor(
    readonly server: RunningServer,
    readonly id: string,
    readonly initialize: RpcMessage,
  ) {}

  static async open(
    server: RunningServer,
    agent = "mock",
    params: Record<string, unknown> = {},
  ): Promise<RawConnection> {
    const response = await fetch(`${server.baseUrl}/v2/rpc`, {
      method: "POST",
      headers: server.headers({ "content-type": "application/json" }),
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 0,
        method: "initialize",
        params: {
          protocolVersion: 1,
          clientCapabilities: {},
          _meta: { "sandboxagent.dev": { agent } },
          ...params,
        },
      }),
    });
    if (response.status !== 200)
      throw new Error(`initialize failed: ${response.status} ${await response.text()}`);
    const id = response.headers.get("acp-connection-id")!;
    return new RawConnection(server, id, (await response.json()) as RpcMessage);
  }

  /** The same connection on another server process (a restarted one, on the same data directory). */
  on(server: RunningServer): RawConnection {
    const conn = new RawConnection(server, this.id, this.initialize);
    conn.nextId = this.nextId;
    return conn;
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return this.server.headers({ "acp-connection-id": this.id, ...extra });
  }

  post(message: object | string, extra: Record<string, string> = {}): Promise<Response> {
    return fetch(`${this.server.baseUrl}/v2/rpc`, {
      method: "POST",
      headers: this.headers({ "content-type": "application/json", ...extra }),
      body: typeof message === "string" ? message : JSON.stringify(message),
    });
  }

  /** POSTs a request and returns its id (the response comes on SSE). */
  async send(method: string, params: Record<string, unknown>): Promise<number> {
    const id = this.nextId++;
    const response = await this.post({ jsonrpc: "2.0", id, method, params });
    if (response.status !== 202) throw new Error(`${method}: ${response.status} ${await response.text()}`);
    return id;
  }

  notify(method: string, params: Record<string, unknown>): Promise<Response> {
    return this.post({ jsonrpc: "2.0", method, params });
  }

  get(extra: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
    return fetch(`${this.server.baseUrl}/v2/rpc`, {
      headers: this.headers({ accept: "text/event-stream", ...extra }),
      signal,
    });
  }

  /**
   * Opens the SSE stream. Like a real client it resumes from the previous reader's cursor (taking
   * over from it); pass `null` to open without Last-Event-ID.
   */
  async openSse(lastEventId?: string | null): Promise<SseReader> {
    const cursor = lastEventId === null ? undefined : (lastEventId ?? this.reader?.lastId());
    const controller = new AbortController();
    const response = await this.get(cursor ? { "last-event-id": cursor } : {}, controller.signal);
    if (response.status !== 200) throw new Error(`GET failed: ${response.status} ${await response.text()}`);
    this.reader = new SseReader(response, controller);
    return this.reader;
  }

  delete(): Promise<Response> {
    return fetch(`${this.server.baseUrl}/v2/rpc`, { method: "DELETE", headers: this.headers() });
  }

  /** Sends a request and waits for its response on `sse`. */
  async call(
    sse: SseReader,
    method: string,
    params: Record<string, unknown>,
    timeoutMs?: number,
  ): Promise<RpcMessage> {
    const id = await this.send(method, params);
    return sse.waitFor((m) => m.id === id && m.method === undefined, timeoutMs);
  }

  async newSession(sse: SseReader, cwd = process.cwd()): Promise<string> {
    const response = await this.call(sse, "session/new", { cwd, mcpServers: [] });
    return response.result!.sessionId!;
  }

  prompt(sse: SseReader, sessionId: string, text: string, timeoutMs?: number): Promise<RpcMessage> {
    return this.call(sse, "session/prompt", { sessionId, prompt: [{ type: "text", text }] }, timeoutMs);
  }
}

/** Text of all agent_message_chunk updates received for a session. */
export function agentText(messages: RpcMessage[], sessionId?: string): string {
  return messages
    .filter((m) => m.method === "session/update")
    .filter((m) => sessionId === undefined || m.params?.sessionId === sessionId)
    .map((m) => m.params?.update as { sessionUpdate: string; content?: { type: string; text?: string } })
    .filter((u) => u.sessionUpdate === "agent_message_chunk" && u.content?.type === "text")
    .map((u) => u.content!.text)
    .join("");
}

/** A new connection to the mock agent with its stream open and one session. */
export async function openSession(
  server: RunningServer,
): Promise<{ conn: RawConnection; sse: SseReader; sessionId: string }> {
  const conn = await RawConnection.open(server);
  const sse = await conn.openSse(null);
  return { conn, sse, sessionId: await conn.newSession(sse) };
}
