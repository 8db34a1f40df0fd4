import { SandboxAgentHttpError, type OutputStream, type Processes } from "sandbox-agent";
import { errorMessage } from "./format.js";
import { Observable } from "./observable.js";

/** A run of output from one stream; `note` marks what the page inserted (a gap). */
export interface LogSegment {
  key: number;
  stream: OutputStream | "note";
  text: string;
}

export interface ExitStatus {
  exitCode: number | null;
  signal: string | null;
}

/** Text kept on the page per process; older output leaves the view (the server keeps its own). */
const MAX_CHARS = 1_000_000;
/** Output is shown in spans of at most this size, so a new chunk changes one small text node. */
const SEGMENT_CHARS = 8192;
/** Colour, cursor and title sequences: logs are shown as plain text (terminals get xterm.js). */
// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]/g;

/**
 * The output of one background process, stdout and stderr interleaved in the server's order.
 * Following resumes after the last chunk seen: after a dropped connection (the SDK reconnects with
 * `Last-Event-ID`) and when the page comes back to the process, so nothing is shown twice.
 */
export class ProcessLog extends Observable {
  readonly segments: LogSegment[] = [];
  /** Characters that left the view to keep the page small. */
  droppedChars = 0;
  exit: ExitStatus | undefined;
  error: string | undefined;
  private lastSeq: number | undefined;
  private follower: AbortController | undefined;
  private chars = 0;
  private nextKey = 0;
  private readonly decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };

  constructor(
    private readonly processes: Processes,
    readonly id: string,
    private readonly onExit: () => void,
  ) {
    super();
  }

  get following(): boolean {
    return this.follower !== undefined;
  }

  get empty(): boolean {
    return this.segments.length === 0;
  }

  /** Follows the output live until the exit; returns the function that pauses it. */
  follow(): () => void {
    if (!this.follower && !this.exit) {
      const follower = new AbortController();
      this.follower = follower;
      void this.run(follower.signal).finally(() => {
        if (this.follower === follower) this.follower = undefined;
        this.changed();
      });
      this.changed();
    }
    return () => this.stop();
  }

  stop(): void {
    this.follower?.abort();
    this.follower = undefined;
  }

  private async run(signal: AbortSignal): Promise<void> {
    this.error = undefined;
    for (;;) {
      try {
        for await (const event of this.processes.logs(this.id, {
          follow: true,
          since: this.lastSeq,
          signal,
        })) {
          if (event.type === "output") {
            this.lastSeq = event.seq;
            this.append(event.stream, this.decoders[event.stream].decode(event.data, { stream: true }));
          } else {
            this.exit = { exitCode: event.exitCode, signal: event.signal };
            this.onExit();
          }
          this.changed();
        }
        return;
      } catch (error) {
        if (signal.aborted) return;
        // The server dropped output this page had not read yet (it keeps the last `maxLogBytes`):
        // say so, and go on from the oldest output it still has.
        if (error instanceof SandboxAgentHttpError && error.status === 410 && this.lastSeq !== undefined) {
          this.append("note", "\n[… output the server no longer keeps was skipped …]\n");
          this.lastSeq = undefined;
          continue;
        }
        this.error = errorMessage(error);
        return;
      }
    }
  }

  private append(stream: LogSegment["stream"], raw: string): void {
    const text = raw.replace(ANSI, "").replace(/\r\n?/g, "\n");
    if (!text) return;
    const last = this.segments.at(-1);
    if (last?.stream === stream && last.text.length + text.length <= SEGMENT_CHARS) last.text += text;
    else this.segments.push({ key: this.nextKey++, stream, text });
    this.chars += text.length;
    while (this.chars > MAX_CHARS && this.segments.length > 1) {
      const first = this.segments.shift()!;
      this.chars -= first.text.length;
      this.droppedChars += first.text.length;
    }
  }
}
