/**
 * The interactive terminal of a `tty` process: xterm.js on the SDK's `terminal(id)` WebSocket,
 * which a browser opens with a single-use ticket in the URL (never the token). This module is
 * loaded with `import()` when a terminal is first shown, so the page's main bundle stays without
 * xterm.js.
 */
import { FitAddon } from "@xterm/addon-fit";
import { Terminal as Xterm } from "@xterm/xterm";
import "@xterm/xterm/css/xterm.css";
import { SandboxAgentHttpError, type Processes, type Terminal } from "sandbox-agent";
import { describeExit, errorMessage } from "../lib/format.js";

export type TerminalStatus =
  | { kind: "connecting" }
  | { kind: "open"; cols: number; rows: number }
  | { kind: "exited"; exitCode: number | null; signal: string | null }
  | { kind: "disconnected"; message: string; retrying: boolean };

/** Resizes are sent once the panel has stopped changing for this long (each one runs `stty`). */
const RESIZE_DEBOUNCE_MS = 100;
/** Waits before reconnecting after a lost connection; then the user can retry by hand. */
const RECONNECT_DELAYS_MS = [250, 1000, 2000, 4000, 8000];

export class TerminalSession {
  private readonly xterm: Xterm;
  private readonly fit = new FitAddon();
  private readonly observer: ResizeObserver;
  private socket: Terminal | undefined;
  /** The size this viewer last gave the process. */
  private sent: { cols: number; rows: number } | undefined;
  private attempts = 0;
  private disposed = false;
  private resizeTimer: ReturnType<typeof setTimeout> | undefined;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    host: HTMLElement,
    private readonly processes: Processes,
    private readonly id: string,
    private readonly onStatus: (status: TerminalStatus) => void,
  ) {
    // Fonts and colours come from the page's stylesheet.
    const css = (name: string) => getComputedStyle(host).getPropertyValue(name).trim();
    this.xterm = new Xterm({
      fontFamily: css("--mono") || "monospace",
      fontSize: 13,
      cursorBlink: true,
      scrollback: 5000,
      theme: {
        background: css("--terminal-bg"),
        foreground: css("--terminal-fg"),
        cursor: css("--terminal-cursor"),
        selectionBackground: css("--terminal-selection"),
      },
    });
    this.xterm.loadAddon(this.fit);
    this.xterm.open(host);
    this.xterm.onData((keys) => this.send(keys));
    // Mouse reports in the legacy encoding: one byte per character.
    this.xterm.onBinary((data) => this.send(Uint8Array.from(data, (c) => c.charCodeAt(0))));
    this.xterm.onResize(() => {
      clearTimeout(this.resizeTimer);
      this.resizeTimer = setTimeout(() => this.sendSize(), RESIZE_DEBOUNCE_MS);
    });
    // The terminal follows its panel: browser window, sidebar, anything that changes the size.
    this.observer = new ResizeObserver(() => this.fit.fit());
    this.observer.observe(host);
    this.fit.fit();
    void this.connect();
  }

  focus(): void {
    this.xterm.focus();
  }

  /** Connects again now (after the automatic attempts gave up). */
  reconnect(): void {
    clearTimeout(this.retryTimer);
    this.attempts = 0;
    void this.connect();
  }

  /** Closes this viewer; the process keeps running. */
  dispose(): void {
    this.disposed = true;
    clearTimeout(this.resizeTimer);
    clearTimeout(this.retryTimer);
    this.observer.disconnect();
    this.socket?.close();
    this.xterm.dispose();
  }

  private async connect(): Promise<void> {
    this.onStatus({ kind: "connecting" });
    let socket: Terminal;
    try {
      socket = await this.processes.terminal(this.id);
    } catch (error) {
      return this.lost(error);
    }
    if (this.disposed) return socket.close();
    this.socket = socket;
    this.attempts = 0;
    // Every new viewer gets the server's scrollback first: start from a clean screen (a full
    // reset written in order, after whatever an earlier connection left in xterm's write queue).
    this.xterm.write("\x1bc");
    // Each viewer brings its size; with several, the last to attach or resize wins.
    this.sent = undefined;
    this.sendSize();
    const reader = socket.readable.getReader();
    try {
      for (let chunk = await reader.read(); !chunk.done && !this.disposed; chunk = await reader.read())
        this.xterm.write(chunk.value);
    } catch {
      // The stream errored: handled like a close below.
    }
    const exit = await socket.exited;
    if (this.disposed || this.socket !== socket) return;
    this.socket = undefined;
    if (exit) {
      this.xterm.write(`\r\n\x1b[2m[process ended: ${describeExit(exit)}]\x1b[0m\r\n`);
      this.onStatus({ kind: "exited", ...exit });
    } else {
      const { code, reason } = await socket.closed;
      this.lost(new Error(`the connection closed (${code}${reason ? `: ${reason}` : ""})`));
    }
  }

  /** Retries a lost connection a few times; not a refusal (the process is gone, access denied). */
  private lost(error: unknown): void {
    if (this.disposed) return;
    const refused = error instanceof SandboxAgentHttpError && error.status < 500;
    const delay = refused ? undefined : RECONNECT_DELAYS_MS[this.attempts++];
    this.onStatus({ kind: "disconnected", message: errorMessage(error), retrying: delay !== undefined });
    if (delay !== undefined) this.retryTimer = setTimeout(() => void this.connect(), delay);
  }

  private send(data: string | Uint8Array): void {
    try {
      this.socket?.write(data);
    } catch {
      // Typed while the connection was going away: the status line already says so.
    }
  }

  private sendSize(): void {
    const { cols, rows } = this.xterm;
    if (!this.socket) return;
    if (this.sent?.cols !== cols || this.sent.rows !== rows) {
      this.socket.resize(cols, rows);
      this.sent = { cols, rows };
    }
    this.onStatus({ kind: "open", cols, rows });
  }
}
