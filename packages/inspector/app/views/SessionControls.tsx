import type { SessionConfigOption } from "@agentclientprotocol/sdk";
import { useState } from "preact/hooks";
import type { ConnectionModel } from "../lib/connection.js";
import { errorMessage } from "../lib/format.js";

type Run = (action: () => Promise<void>) => void;

/** The options of a `select` config option, flattening groups. */
function choices(option: SessionConfigOption & { type: "select" }): { value: string; name: string }[] {
  return option.options
    .flatMap((o) => ("options" in o ? o.options : [o]))
    .map((o) => ({ value: o.value, name: o.name }));
}

function ConfigOption({
  option,
  set,
  run,
}: {
  option: SessionConfigOption;
  set: (value: string | boolean) => Promise<void>;
  run: Run;
}) {
  if (option.type === "boolean") {
    return (
      <label class="control" title={option.description ?? undefined}>
        <input
          type="checkbox"
          checked={option.currentValue}
          onChange={(e) => run(() => set(e.currentTarget.checked))}
        />
        {option.name}
      </label>
    );
  }
  return (
    <label class="control" title={option.description ?? undefined}>
      {option.name}
      <select
        value={String(option.currentValue)}
        onChange={(e) => run(() => set(e.currentTarget.value))}
        data-testid={`config-${option.id}`}
      >
        {choices(option).map((c) => (
          <option key={c.value} value={c.value}>
            {c.name}
          </option>
        ))}
      </select>
    </label>
  );
}

function Title({ connection, sessionId, run }: { connection: ConnectionModel; sessionId: string; run: Run }) {
  const title = connection.titleOf(sessionId);
  const [editing, setEditing] = useState<string>();
  if (editing !== undefined) {
    return (
      <form
        class="rename"
        onSubmit={(e) => {
          e.preventDefault();
          run(() => connection.rename(sessionId, editing));
          setEditing(undefined);
        }}
      >
        <input
          value={editing}
          onInput={(e) => setEditing(e.currentTarget.value)}
          autoFocus
          data-testid="title-input"
        />
        <button class="primary" type="submit">
          Save
        </button>
        <button type="button" onClick={() => setEditing(undefined)}>
          Cancel
        </button>
      </form>
    );
  }
  return (
    <h2 class="pane-heading">
      <span data-testid="session-title">{title || "Untitled session"}</span>
      <button class="link" onClick={() => setEditing(title ?? "")} data-testid="rename">
        rename
      </button>
    </h2>
  );
}

/** Title, ids, mode, model and the agent's other configuration options of one session. */
export function SessionControls({
  connection,
  sessionId,
}: {
  connection: ConnectionModel;
  sessionId: string;
}) {
  const timeline = connection.timeline(sessionId);
  const [error, setError] = useState<string>();
  const run: Run = (action) => {
    setError(undefined);
    action().catch((e: unknown) => setError(errorMessage(e)));
  };
  const models = connection.models.get(sessionId);
  const options = timeline.configOptions ?? [];
  // Mode and model have their own pickers when the agent reports them outside config options.
  const hasModeOption = options.some((o) => o.category === "mode");
  const hasModelOption = options.some((o) => o.category === "model");
  return (
    <div class="pane-header">
      <Title connection={connection} sessionId={sessionId} run={run} />
      <div class="pane-facts muted">
        <span>{connection.agentId}</span>
        <code title="session id">{sessionId}</code>
        {timeline.usage && (
          <span>
            context {timeline.usage.used.toLocaleString()} / {timeline.usage.size.toLocaleString()}
          </span>
        )}
        {timeline.ended && <span class="badge">ended</span>}
      </div>
      <div class="controls">
        {timeline.modes && !hasModeOption && (
          <label class="control">
            Mode
            <select
              value={timeline.modes.currentModeId}
              onChange={(e) => run(() => connection.setMode(sessionId, e.currentTarget.value))}
              data-testid="mode-select"
            >
              {timeline.modes.availableModes.map((m) => (
                <option key={m.id} value={m.id}>
                  {m.name}
                </option>
              ))}
            </select>
          </label>
        )}
        {models && models.models.length > 0 && !hasModelOption && (
          <label class="control">
            Model
            <select
              value={models.currentModelId ?? ""}
              onChange={(e) => run(() => connection.setModel(sessionId, e.currentTarget.value))}
            >
              {models.models.map((m) => (
                <option key={m.id} value={m.id}>
                  {m.name ?? m.id}
                </option>
              ))}
            </select>
          </label>
        )}
        {options.map((option) => (
          <ConfigOption
            key={option.id}
            option={option}
            run={run}
            set={(value) => connection.setConfigOption(sessionId, option.id, value)}
          />
        ))}
      </div>
      {error && <div class="form-error">{error}</div>}
    </div>
  );
}
