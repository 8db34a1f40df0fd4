import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import type { ProcessInfo } from "sandbox-agent";
import { describeExit, errorMessage, formatBytes } from "../lib/format.js";
import { useObservable } from "../lib/observable.js";
import type { ProcessLog } from "../lib/process-log.js";
import type { ProcessesModel } from "../lib/processes.js";

/** A background process' output, followed live: stdout plain, stderr marked. */
export function ProcessLogView({ log }: { log: ProcessLog }) {
  useObservable(log);
  useEffect(() => log.follow(), [log]);
  const ref = useRef<HTMLPreElement>(null);
  // Stays scrolled to the end unless the reader scrolled up.
  const atEnd = useRef(true);
  useLayoutEffect(() => {
    const pre = ref.current;
    if (pre && atEnd.current) pre.scrollTop = pre.scrollHeight;
  });
  const onScroll = () => {
    const pre = ref.current!;
    atEnd.current = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 16;
  };
  return (
    <div class="log-view">
      <div class="log-status">
        <span class="legend">
          <span class="log-stdout">stdout</span> <span class="log-stderr">stderr</span>
        </span>
        {log.following && <span class="dot open">following</span>}
        {log.exit && <span class="dot ended">ended: {describeExit(log.exit)}</span>}
        {log.error && (
          <span class="form-error">
            {log.error}{" "}
            <button class="link" onClick={() => log.follow()}>
              retry
            </button>
          </span>
        )}
      </div>
      <pre class="log-text" ref={ref} onScroll={onScroll} data-testid="process-log">
        {log.droppedChars > 0 && (
          <span class="log-note">
            [{formatBytes(log.droppedChars)} of earlier output is no longer shown here]{"\n"}
          </span>
        )}
        {log.segments.map((s) => (
          <span key={s.key} class={`log-${s.stream}`}>
            {s.text}
          </span>
        ))}
        {log.empty && <span class="muted">{log.exit ? "no output" : "no output yet"}</span>}
      </pre>
    </div>
  );
}

/** Typing to a background process' stdin: a line at a time, then end-of-file. */
export function StdinBar({ model, process }: { model: ProcessesModel; process: ProcessInfo }) {
  const [line, setLine] = useState("");
  const [error, setError] = useState<string>();
  const send = async (eof: boolean) => {
    setError(undefined);
    try {
      await model.input(process.id, line === "" && eof ? "" : `${line}\n`, eof);
      setLine("");
    } catch (e) {
      setError(errorMessage(e));
    }
  };
  if (process.status !== "running" || !process.stdinOpen) return null;
  return (
    <form
      class="stdin-bar"
      onSubmit={(e) => {
        e.preventDefault();
        void send(false);
      }}
    >
      <input
        value={line}
        onInput={(e) => setLine(e.currentTarget.value)}
        placeholder="stdin: a line to send (Enter)"
        data-testid="stdin"
      />
      <button type="submit">Send</button>
      <button type="button" onClick={() => void send(true)} data-testid="stdin-eof" title="close stdin">
        Send EOF
      </button>
      {error && <span class="form-error">{error}</span>}
    </form>
  );
}
