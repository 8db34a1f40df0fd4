import { useEffect, useRef, useState } from "preact/hooks";
import type { Processes } from "sandbox-agent";
import { describeExit, errorMessage } from "../lib/format.js";
// Types only: the module itself (xterm.js) is loaded by `import()` below, in its own chunk.
import type { TerminalSession, TerminalStatus } from "../terminal/terminal-session.js";

type Status = TerminalStatus | { kind: "loading" } | { kind: "failed"; message: string };

function StatusLine({ status, onReconnect }: { status: Status; onReconnect: () => void }) {
  switch (status.kind) {
    case "loading":
      return <span class="muted">loading the terminal…</span>;
    case "failed":
      return <span class="form-error">The terminal could not load: {status.message}</span>;
    case "connecting":
      return <span class="dot connecting">connecting…</span>;
    case "open":
      return (
        <span class="dot open">
          connected · {status.cols}×{status.rows}
        </span>
      );
    case "exited":
      return <span class="dot ended">process ended: {describeExit(status)}</span>;
    case "disconnected":
      return (
        <span class="dot failed">
          {status.message}
          {status.retrying ? " · reconnecting…" : " "}
          {!status.retrying && (
            <button class="link" onClick={onReconnect}>
              reconnect
            </button>
          )}
        </span>
      );
  }
}

/** An interactive terminal on a `tty` process; any number of pages may view the same one. */
export function TerminalView({
  processes,
  id,
  onExit,
}: {
  processes: Processes;
  id: string;
  onExit: () => void;
}) {
  const host = useRef<HTMLDivElement>(null);
  const session = useRef<TerminalSession | undefined>(undefined);
  const [status, setStatus] = useState<Status>({ kind: "loading" });
  useEffect(() => {
    let disposed = false;
    import("../terminal/terminal-session.js").then(
      ({ TerminalSession }) => {
        if (disposed) return;
        session.current = new TerminalSession(host.current!, processes, id, setStatus);
        session.current.focus();
      },
      (error: unknown) => setStatus({ kind: "failed", message: errorMessage(error) }),
    );
    return () => {
      disposed = true;
      session.current?.dispose();
      session.current = undefined;
    };
  }, [processes, id]);
  useEffect(() => {
    if (status.kind === "exited") onExit();
  }, [status.kind]);
  return (
    <div class="terminal-pane">
      <div class="terminal-status" data-testid="terminal-status">
        <StatusLine status={status} onReconnect={() => session.current?.reconnect()} />
      </div>
      <div class="terminal-host" ref={host} data-testid="terminal" />
    </div>
  );
}
