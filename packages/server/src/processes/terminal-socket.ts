import type { IncomingMessage } from "node:http";
import { WebSocketServer, type RawData, type WebSocket } from "ws";
import { problems } from "../http/problem.js";
import { checkUpgrade, refuseUpgrade, type UpgradeHandler } from "../http/upgrade.js";
import type { SecurityOptions } from "../http/security.js";
import type { Logger } from "../log.js";
import { ProcessError } from "./command.js";
import type { ProcessManager } from "./manager.js";
import type { ManagedProcess, OutputReader, ProcessExit } from "./managed-process.js";
import type { OutputEntry } from "./output-log.js";

export interface TerminalSocketDeps {
  manager: ProcessManager;
  security: SecurityOptions;
  logger: Logger;
}

const TERMINAL_PATH = /^\/v2\/processes\/([^/]+)\/terminal$/;
/** Output queued on a viewer's socket beyond which it gets no more until it drains. */
const HIGH_WATER_BYTES = 1024 * 1024;
/** How long a viewer has to answer the close handshake once the process exited. */
const CLOSE_TIMEOUT_MS = 1_000;

/**
 * Serves `GET /v2/processes/{id}/terminal` upgrades: Host and Origin checked as for every request;
 * authenticated by `Authorization: Bearer` (Node clients) or a single-use `?ticket=` (browsers,
 * which cannot set headers on a WebSocket); then the socket becomes a viewer of the terminal.
 */
export function terminalUpgradeHandler(deps: TerminalSocketDeps): UpgradeHandler {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: deps.manager.limits.maxInputBytes,
    perMessageDeflate: false,
  });
  return (req, socket, head) => {
    try {
      const proc = admit(req, deps);
      wss.handleUpgrade(req, socket, head, (ws) => new TerminalViewer(ws, proc, deps));
    } catch (error) {
      refuseUpgrade(socket, error, deps.logger);
    }
  };
}

function admit(req: IncomingMessage, deps: TerminalSocketDeps): ManagedProcess {
  const url = new URL(req.url ?? "/", "http://localhost");
  const match = TERMINAL_PATH.exec(url.pathname);
  if (!match) throw problems.notFound(`No WebSocket endpoint at ${url.pathname}.`);
  const id = decodeURIComponent(match[1]!);
  checkUpgrade(req, url, deps.security, (ticket) => deps.manager.redeemTicket(ticket, id));
  let proc: ManagedProcess;
  try {
    proc = deps.manager.get(id);
  } catch (error) {
    throw error instanceof ProcessError ? problems.notFound(error.message) : error;
  }
  if (!proc.spec.tty) throw problems.conflict(`Process ${id} has no terminal; create it with tty: true.`);
  return proc;
}

/** Control messages a viewer may send as text; bytes are sent as binary messages. */
type ViewerMessage = { type: "input"; data: string } | { type: "resize"; cols: number; rows: number };

/**
 * One WebSocket attached to a terminal: the scrollback, then live output, as binary messages;
 * keyboard input and resizes back. Output is flow-controlled per viewer (the process waits for a
 * slow viewer, as a terminal would); a viewer stuck for `stallMs` is disconnected.
 */
class TerminalViewer implements OutputReader {
  cursor: number;
  /** Bytes of the first replayed chunk left out, so the scrollback is exactly `scrollbackBytes`. */
  private skip: number;
  private stall: NodeJS.Timeout | undefined;
  /** Input is written in arrival order, one message at a time. */
  private input: Promise<void> = Promise.resolve();
  private pending = 0;

  constructor(
    private readonly ws: WebSocket,
    private readonly proc: ManagedProcess,
    private readonly deps: TerminalSocketDeps,
  ) {
    const scrollback = deps.manager.limits.scrollbackBytes;
    this.cursor = proc.log.cursorForTail(scrollback);
    const replayed = proc.log.after(this.cursor).reduce((sum, e) => sum + e.data.length, 0);
    this.skip = Math.max(0, replayed - scrollback);
    ws.on("message", (data, isBinary) => this.receive(data, isBinary));
    ws.on("error", () => ws.terminate());
    ws.once("close", () => {
      clearTimeout(this.stall);
      proc.detach(this);
    });
    proc.attach(this);
  }

  get ready(): boolean {
    return this.ws.readyState === this.ws.OPEN && this.ws.bufferedAmount < HIGH_WATER_BYTES;
  }

  deliver(entries: OutputEntry[]): void {
    for (const { data } of entries) {
      const bytes = this.skip > 0 ? data.subarray(this.skip) : data;
      this.skip = Math.max(0, this.skip - data.length);
      if (bytes.length > 0) this.ws.send(bytes, { binary: true }, () => this.sent());
    }
  }

  end(exit: ProcessExit): void {
    this.ws.send(JSON.stringify({ type: "exit", ...exit }));
    this.ws.close(1000, "process exited");
    setTimeout(() => this.ws.terminate(), CLOSE_TIMEOUT_MS).unref();
  }

  private sent(): void {
    if (this.ready) {
      clearTimeout(this.stall);
      this.stall = undefined;
      this.proc.pump(this);
    } else {
      this.stall ??= setTimeout(() => this.ws.terminate(), this.deps.manager.limits.stallMs).unref();
    }
  }

  private receive(data: RawData, isBinary: boolean): void {
    const bytes = Buffer.isBuffer(data)
      ? data
      : Buffer.concat(Array.isArray(data) ? data : [Buffer.from(data)]);
    if (isBinary) return this.enqueue(() => this.proc.write(bytes));
    const message = parseMessage(bytes.toString("utf8"));
    if (message === undefined)
      return this.report('Send bytes as binary messages, or {"type":"input"|"resize",…}.');
    if (message.type === "input")
      return this.enqueue(() => this.proc.write(Buffer.from(message.data, "utf8")));
    this.enqueue(() => this.proc.resize({ cols: message.cols, rows: message.rows }));
  }

  /** Runs writes one after the other; the socket is not read while writes wait for the pipe. */
  private enqueue(work: () => Promise<void>): void {
    if (this.pending++ === 0) this.ws.pause();
    this.input = this.input
      .then(work)
      .catch((error: unknown) => this.report(error instanceof Error ? error.message : String(error)))
      .finally(() => {
        if (--this.pending === 0) this.ws.resume();
      });
  }

  private report(message: string): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(JSON.stringify({ type: "error", message }));
  }
}

function parseMessage(text: string): ViewerMessage | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null) return undefined;
  const message = value as Record<string, unknown>;
  if (message.type === "input" && typeof message.data === "string")
    return { type: "input", data: message.data };
  const size = (n: unknown) => typeof n === "number" && Number.isInteger(n) && n >= 1 && n <= 1000;
  if (message.type === "resize" && size(message.cols) && size(message.rows))
    return { type: "resize", cols: message.cols as number, rows: message.rows as number };
  return undefined;
}
