/**
 * A terminal process over its WebSocket (`GET /v2/processes/{id}/terminal`), as a duplex: output
 * bytes on `readable`, keyboard input on `writable`, plus `resize`. In Node it uses `ws` and sends
 * the token as `Authorization`; in browsers (or with a `WebSocket` option) it uses the standard
 * WebSocket, which cannot send headers, and authenticates with a single-use ticket instead.
 */
import type { HttpTransport } from "./http.js";

/** The standard WebSocket interface, as browsers and `ws` implement it. */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  send(data: string | ArrayBufferLike | Uint8Array): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "open", listener: () => void): void;
  addEventListener(type: "message", listener: (event: { data: unknown }) => void): void;
  addEventListener(type: "close", listener: (event: { code: number; reason: string }) => void): void;
  addEventListener(type: "error", listener: (event: { message?: string }) => void): void;
}

/** A WebSocket constructor with the standard signature (e.g. `globalThis.WebSocket`). */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

export interface TerminalOptions {
  /**
   * WebSocket implementation to use, called like the standard one (no headers: a ticket is
   * fetched first when the client has a token). Default: `ws` in Node, the global one elsewhere.
   */
  WebSocket?: WebSocketConstructor;
}

export interface TerminalExit {
  exitCode: number | null;
  signal: string | null;
}

const OPEN = 1;

/** An open terminal. Closing it (or leaving it) does not stop the process; `stop` or `remove` does. */
export class Terminal {
  /** Output: the scrollback the server replays first, then live output. Ends when the socket closes. */
  readonly readable: ReadableStream<Uint8Array>;
  /** Keyboard input; strings are sent as UTF-8. */
  readonly writable: WritableStream<Uint8Array | string>;
  /** Resolves with the exit status when the process exits, or `undefined` if the socket closes first. */
  readonly exited: Promise<TerminalExit | undefined>;
  /** Resolves when the socket is closed, with its close code and reason. */
  readonly closed: Promise<{ code: number; reason: string }>;
  private exit: TerminalExit | undefined;

  constructor(private readonly socket: WebSocketLike) {
    let output!: ReadableStreamDefaultController<Uint8Array>;
    // Once the reader cancels, the stream takes no more chunks: enqueueing or closing it would
    // throw inside the socket's event listener (an uncaught error in a browser, a crash in Node).
    let reading = true;
    this.readable = new ReadableStream({
      start: (controller) => void (output = controller),
      // A reader that stops reading (e.g. `break` out of `for await`) closes this viewer.
      cancel: () => {
        reading = false;
        this.close();
      },
    });
    this.writable = new WritableStream({ write: (chunk) => this.write(chunk) });
    socket.addEventListener("message", ({ data }) => {
      if (typeof data === "string") this.control(data);
      else if (reading) output.enqueue(new Uint8Array(data as ArrayBuffer));
    });
    this.closed = new Promise((resolve) =>
      socket.addEventListener("close", ({ code, reason }) => {
        if (reading) output.close();
        reading = false;
        resolve({ code, reason });
      }),
    );
    this.exited = this.closed.then(() => this.exit);
  }

  /** Sends keyboard input (e.g. `"ls\r"`, `"\x03"` for Ctrl-C). */
  write(data: string | Uint8Array): void {
    if (this.socket.readyState !== OPEN) throw new Error("The terminal is closed.");
    this.socket.send(typeof data === "string" ? new TextEncoder().encode(data) : data);
  }

  /** Sets the window size; the program gets SIGWINCH. */
  resize(cols: number, rows: number): void {
    this.socket.send(JSON.stringify({ type: "resize", cols, rows }));
  }

  /** Closes this viewer; the process keeps running. */
  close(): void {
    this.socket.close(1000);
  }

  private control(text: string): void {
    const message = JSON.parse(text) as { type: string } & Partial<TerminalExit>;
    if (message.type === "exit")
      this.exit = { exitCode: message.exitCode ?? null, signal: message.signal ?? null };
  }
}

/** Connects to the terminal of process `path` (`/v2/processes/{id}`). */
export async function openTerminal(
  http: HttpTransport,
  path: string,
  options: TerminalOptions,
): Promise<Terminal> {
  const url = new URL(http.url(`${path}/terminal`));
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  const nodeWs = options.WebSocket ? undefined : await loadNodeWebSocket();
  let socket: WebSocketLike;
  if (nodeWs) {
    socket = new nodeWs(url.toString(), { headers: http.headers() });
  } else {
    const Standard = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!Standard) throw new Error("No WebSocket implementation: pass the `WebSocket` option.");
    if (http.hasToken) {
      const { ticket } = await http.json<{ ticket: string }>({
        method: "POST",
        path: `${path}/terminal/ticket`,
      });
      url.searchParams.set("ticket", ticket);
    }
    socket = new Standard(url.toString());
  }
  socket.binaryType = "arraybuffer";
  // Listen before the socket opens: the server sends the scrollback right after the upgrade, and
  // `ws` may deliver it in the same tick as `open`, before an `await` here would resume.
  const terminal = new Terminal(socket);
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener("open", () => resolve());
    socket.addEventListener("error", (event) =>
      reject(
        new Error(`Terminal WebSocket to ${url.pathname} failed${event.message ? `: ${event.message}` : ""}`),
      ),
    );
  });
  return terminal;
}

type NodeWebSocket = new (url: string, options: { headers: Record<string, string> }) => WebSocketLike;

/** `ws` when running in Node (it can send the token as a header); undefined in browsers. */
async function loadNodeWebSocket(): Promise<NodeWebSocket | undefined> {
  if (!(globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node)
    return undefined;
  try {
    return (await import("ws")).WebSocket as unknown as NodeWebSocket;
  } catch {
    return undefined;
  }
}
