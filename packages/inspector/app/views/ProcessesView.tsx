import { useEffect, useState } from "preact/hooks";
import type { CreateOptions, ProcessInfo } from "sandbox-agent";
import { describeExit, errorMessage, formatBytes, formatRelative, shortId } from "../lib/format.js";
import { useObservable } from "../lib/observable.js";
import {
  commandLine,
  SHELL_COMMAND,
  splitArgs,
  type ProcessAction,
  type ProcessesModel,
} from "../lib/processes.js";
import { ProcessLogView, StdinBar } from "./ProcessLogView.js";
import { TerminalView } from "./TerminalView.js";

function StatusBadge({ process }: { process: ProcessInfo }) {
  if (process.status === "running") return <span class="badge ok">running</span>;
  const clean = process.exitCode === 0 && !process.signal;
  return <span class={`badge${clean ? "" : " warn"}`}>{describeExit(process)}</span>;
}

function NewProcessForm({ model, open }: { model: ProcessesModel; open: (id: string) => void }) {
  const [command, setCommand] = useState("");
  const [args, setArgs] = useState("");
  const [cwd, setCwd] = useState("");
  const [tty, setTty] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();
  const start = async (options: CreateOptions) => {
    setBusy(true);
    setError(undefined);
    try {
      open((await model.create(options)).id);
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setBusy(false);
    }
  };
  const workdir = model.server.health.workdir;
  return (
    <div class="new-process">
      <button
        class="primary"
        disabled={busy}
        onClick={() => void start({ ...SHELL_COMMAND, tty: true, ...(cwd ? { cwd } : {}) })}
        data-testid="new-terminal"
        title="The server's $SHELL (else /bin/sh) on a terminal, in the working directory"
      >
        New terminal
      </button>
      <form
        class="side-form"
        onSubmit={(e) => {
          e.preventDefault();
          void start({ command: command.trim(), args: splitArgs(args), tty, ...(cwd ? { cwd } : {}) });
        }}
      >
        <label>
          <span>
            Command <span class="muted">(a program in PATH, no shell)</span>
          </span>
          <input
            value={command}
            onInput={(e) => setCommand(e.currentTarget.value)}
            placeholder="sh"
            required
            data-testid="process-command"
          />
        </label>
        <label>
          <span>
            Arguments <span class="muted">(quotes group words)</span>
          </span>
          <input
            value={args}
            onInput={(e) => setArgs(e.currentTarget.value)}
            placeholder={`-c "npm test"`}
            data-testid="process-args"
          />
        </label>
        <label>
          Working directory
          <input value={cwd} onInput={(e) => setCwd(e.currentTarget.value)} placeholder={workdir} />
        </label>
        <label class="checkbox">
          <input type="checkbox" checked={tty} onChange={(e) => setTty(e.currentTarget.checked)} />
          on a terminal (tty): interactive, output in one stream
        </label>
        <button type="submit" disabled={busy || !command.trim()} data-testid="start-process">
          {busy ? "Starting…" : "Start process"}
        </button>
        {error && <div class="form-error">{error}</div>}
      </form>
    </div>
  );
}

function ProcessRow({
  process,
  selected,
  open,
}: {
  process: ProcessInfo;
  selected: boolean;
  open: (id: string) => void;
}) {
  return (
    <li class={`list-row${selected ? " selected" : ""}`} data-testid="process-row">
      <button class="list-open" onClick={() => open(process.id)} title={commandLine(process)}>
        <code class="list-title">{commandLine(process)}</code>
        <span class="list-meta">
          <StatusBadge process={process} />
          <span>pid {process.pid}</span>
          {process.tty && <span class="badge">tty</span>}
          {process.source === "acp" && (
            <span class="badge" title="started by an agent">
              agent
            </span>
          )}
          <span title={process.createdAt}>{formatRelative(process.createdAt)}</span>
        </span>
      </button>
    </li>
  );
}

function ProcessPane({
  model,
  process,
  close,
}: {
  model: ProcessesModel;
  process: ProcessInfo;
  close: () => void;
}) {
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState<ProcessAction>();
  const act = async (action: ProcessAction) => {
    setBusy(action);
    setError(undefined);
    try {
      await model.act(process.id, action);
      if (action === "remove") return close();
    } catch (e) {
      setError(errorMessage(e));
    }
    setBusy(undefined);
  };
  const running = process.status === "running";
  return (
    <div class="pane" data-testid="process-pane">
      <header class="pane-header">
        <h2 class="pane-heading">
          <code class="process-title">{commandLine(process)}</code>
          <span data-testid="process-status">
            <StatusBadge process={process} />
          </span>
        </h2>
        <div class="pane-facts muted">
          <span title={process.id}>id {shortId(process.id)}</span>
          <span>pid {process.pid}</span>
          <span title="working directory">{process.cwd}</span>
          <span title={process.createdAt}>started {formatRelative(process.createdAt)}</span>
          {process.exitedAt && <span title={process.exitedAt}>ended {formatRelative(process.exitedAt)}</span>}
          {process.tty ? (
            <span>
              terminal {process.cols}×{process.rows}
            </span>
          ) : (
            <span>
              stdout {formatBytes(process.stdoutBytes)} · stderr {formatBytes(process.stderrBytes)}
            </span>
          )}
        </div>
        <div class="controls">
          <button
            onClick={() => void act("stop")}
            disabled={!running || busy !== undefined}
            title="SIGTERM to the process group (SIGKILL if it is still there after the grace period)"
            data-testid="process-stop"
          >
            {busy === "stop" ? "Stopping…" : "Stop"}
          </button>
          <button
            onClick={() => void act("kill")}
            disabled={!running || busy !== undefined}
            title="SIGKILL to the process group"
            data-testid="process-kill"
          >
            Kill
          </button>
          <button
            class="danger"
            onClick={() => void act("remove")}
            disabled={busy !== undefined}
            title="Kill it if it runs, and forget it and its output"
            data-testid="process-remove"
          >
            Remove
          </button>
        </div>
        {error && <div class="form-error">{error}</div>}
      </header>
      {process.tty ? (
        <TerminalView processes={model.api} id={process.id} onExit={() => void model.refresh()} />
      ) : (
        <>
          <ProcessLogView log={model.log(process.id)} />
          <StdinBar model={model} process={process} />
        </>
      )}
    </div>
  );
}

export function ProcessesView({
  model,
  selectedId,
  open,
}: {
  model: ProcessesModel;
  selectedId: string | undefined;
  /** Shows a process, or none (the list alone). */
  open: (id: string | undefined) => void;
}) {
  useObservable(model);
  useEffect(() => model.watch(), [model]);
  const selected = selectedId ? model.find(selectedId) : undefined;
  return (
    <div class="split-view">
      <aside class="sidebar">
        <NewProcessForm model={model} open={open} />
        <div class="list-heading">
          <h3>Processes</h3>
          <label class="checkbox" title="refresh the list every 2 seconds">
            <input
              type="checkbox"
              checked={model.live}
              onChange={(e) => model.setLive(e.currentTarget.checked)}
            />
            live
          </label>
          <button class="link" onClick={() => void model.refresh()} data-testid="refresh-processes">
            refresh
          </button>
        </div>
        {model.error && <div class="form-error">{model.error}</div>}
        {model.loaded && model.processes.length === 0 && (
          <div class="muted small-print">None yet: open a terminal or start a process above.</div>
        )}
        <ul class="item-list" data-testid="process-list">
          {model.processes.map((process) => (
            <ProcessRow key={process.id} process={process} selected={process.id === selectedId} open={open} />
          ))}
        </ul>
      </aside>
      <main class="main">
        {selected ? (
          <ProcessPane key={selected.id} model={model} process={selected} close={() => open(undefined)} />
        ) : (
          <div class="placeholder">
            <h2>{selectedId && model.loaded ? "Process not found" : "No process open"}</h2>
            <p>
              {selectedId && model.loaded
                ? "It was removed, or the server forgot it after it exited."
                : "Open a terminal, start a process, or pick one from the list."}
            </p>
          </div>
        )}
      </main>
    </div>
  );
}
