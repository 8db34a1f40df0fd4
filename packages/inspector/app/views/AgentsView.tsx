import { useEffect, useRef, useState } from "preact/hooks";
import type { AgentDescription } from "sandbox-agent";
import { errorMessage, formatRelative } from "../lib/format.js";
import type { Workspace } from "../lib/workspace.js";

interface InstallState {
  lines: string[];
  running: boolean;
  result?: string;
  error?: string;
}

function lastAgentInfo(agent: AgentDescription): string | undefined {
  const info = agent.lastInitialize?.agentInfo as { name?: string; version?: string } | undefined;
  return info ? [info.name, info.version].filter(Boolean).join(" ") : undefined;
}

function InstallLog({ state }: { state: InstallState }) {
  const ref = useRef<HTMLPreElement>(null);
  useEffect(() => {
    if (ref.current) ref.current.scrollTop = ref.current.scrollHeight;
  }, [state.lines.length]);
  return (
    <div class="install-log">
      <pre ref={ref} data-testid="install-log">
        {state.lines.join("\n") || "waiting for npm…"}
      </pre>
      {state.result && <div class="ok">{state.result}</div>}
      {state.error && <div class="form-error">{state.error}</div>}
    </div>
  );
}

function AgentCard({
  agent,
  workspace,
  onChanged,
  onStart,
}: {
  agent: AgentDescription;
  workspace: Workspace;
  onChanged: () => void;
  onStart: (id: string) => void;
}) {
  const [install, setInstall] = useState<InstallState>();
  const runInstall = async () => {
    const state: InstallState = { lines: [], running: true };
    const update = () => setInstall({ ...state, lines: [...state.lines] });
    update();
    try {
      const result = await workspace.server.control.installAgent(agent.id, {
        onProgress: (line) => {
          state.lines.push(line);
          update();
        },
      });
      state.result = result.alreadyInstalled
        ? `already installed${result.version ? ` (${result.version})` : ""}`
        : `installed ${result.version ?? ""} in ${(result.durationMs / 1000).toFixed(1)} s`;
      onChanged();
    } catch (error) {
      state.error = errorMessage(error);
    }
    state.running = false;
    update();
  };
  const seen = lastAgentInfo(agent);
  return (
    <article class="agent-card" data-testid={`agent-${agent.id}`}>
      <header>
        <div>
          <h3>{agent.name}</h3>
          <code>{agent.id}</code> <span class="muted">{agent.source}</span>
        </div>
        <span class={`badge ${agent.installed ? "ok" : "warn"}`}>
          {agent.installed ? `installed${agent.version ? ` ${agent.version}` : ""}` : "not installed"}
        </span>
      </header>
      {agent.notes && <p class="muted">{agent.notes}</p>}
      <dl>
        {agent.packages.length > 0 && (
          <>
            <dt>packages</dt>
            <dd>
              {agent.packages.map((p) => (
                <code key={p.name}>
                  {p.name}@{p.version}
                </code>
              ))}
            </dd>
          </>
        )}
        {agent.env.length > 0 && (
          <>
            <dt>environment</dt>
            <dd>
              {agent.env.map((name) => (
                <code key={name}>{name}</code>
              ))}
            </dd>
          </>
        )}
        {seen && (
          <>
            <dt>last started</dt>
            <dd>
              {seen}{" "}
              <span class="muted">{formatRelative(agent.lastInitialize?.at as string | undefined)}</span>
            </dd>
          </>
        )}
      </dl>
      <div class="agent-actions">
        {agent.installable && (
          <button onClick={() => void runInstall()} disabled={install?.running} data-testid="install">
            {install?.running ? "Installing…" : agent.installed ? "Reinstall / update" : "Install"}
          </button>
        )}
        <button class="primary" disabled={!agent.installed} onClick={() => onStart(agent.id)}>
          New session
        </button>
      </div>
      {install && <InstallLog state={install} />}
    </article>
  );
}

export function AgentsView({
  workspace,
  onSessionStarted,
}: {
  workspace: Workspace;
  onSessionStarted: () => void;
}) {
  const [agents, setAgents] = useState<AgentDescription[]>();
  const [error, setError] = useState<string>();
  const load = () =>
    workspace.server.control.listAgents().then(setAgents, (e: unknown) => setError(errorMessage(e)));
  useEffect(() => void load(), [workspace]);
  const start = (agentId: string) => {
    setError(undefined);
    workspace
      .newSession(agentId, workspace.server.health.workdir)
      .then(onSessionStarted, (e: unknown) => setError(errorMessage(e)));
  };
  return (
    <div class="page">
      <h2>Agents</h2>
      {error && <div class="form-error">{error}</div>}
      {!agents && !error && <div class="muted">Loading…</div>}
      <div class="agent-grid">
        {agents?.map((agent) => (
          <AgentCard
            key={agent.id}
            agent={agent}
            workspace={workspace}
            onChanged={() => void load()}
            onStart={start}
          />
        ))}
      </div>
    </div>
  );
}
