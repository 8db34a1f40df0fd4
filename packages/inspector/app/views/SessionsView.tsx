import { useEffect, useState } from "preact/hooks";
import type { AgentDescription, ConnectionInfo, SessionSummary } from "sandbox-agent";
import { Conversation } from "../components/Conversation.js";
import { RawView } from "../components/RawView.js";
import type { ConnectionModel } from "../lib/connection.js";
import { errorMessage, formatRelative, shortId } from "../lib/format.js";
import { useObservable } from "../lib/observable.js";
import { TRANSPORT_LABEL, type Transport } from "../lib/transport.js";
import type { Workspace } from "../lib/workspace.js";
import { SessionControls } from "./SessionControls.js";

function NewSessionForm({ workspace, agents }: { workspace: Workspace; agents: AgentDescription[] }) {
  const usable = agents.filter((a) => a.installed);
  const [agentId, setAgentId] = useState("");
  const [cwd, setCwd] = useState(workspace.server.health.workdir ?? "");
  const [title, setTitle] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();
  const chosen = agentId || usable[0]?.id || "";
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await workspace.newSession(chosen, cwd, title.trim() || undefined);
      setTitle("");
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="side-form" onSubmit={submit}>
      <label>
        Agent
        <select value={chosen} onChange={(e) => setAgentId(e.currentTarget.value)} data-testid="agent-select">
          {usable.map((a) => (
            <option key={a.id} value={a.id}>
              {a.name} ({a.id})
            </option>
          ))}
        </select>
      </label>
      <label>
        Transport
        <select
          value={workspace.transport}
          onChange={(e) => workspace.setTransport(e.currentTarget.value as Transport)}
          title="How new agent connections travel: POSTs and an SSE stream, or one WebSocket"
          data-testid="transport-select"
        >
          {(Object.keys(TRANSPORT_LABEL) as Transport[]).map((t) => (
            <option key={t} value={t}>
              {TRANSPORT_LABEL[t]}
            </option>
          ))}
        </select>
      </label>
      <label>
        Working directory
        <input value={cwd} onInput={(e) => setCwd(e.currentTarget.value)} placeholder="/workspace" required />
      </label>
      <label>
        <span>
          Title <span class="muted">(optional)</span>
        </span>
        <input value={title} onInput={(e) => setTitle(e.currentTarget.value)} placeholder="Fix the tests" />
      </label>
      <button class="primary" type="submit" disabled={busy || !chosen} data-testid="new-session">
        {busy ? "Starting…" : "New session"}
      </button>
      {usable.length === 0 && <div class="muted">No installed agent: install one in Agents.</div>}
      {error && <div class="form-error">{error}</div>}
    </form>
  );
}

function SessionRow({
  summary,
  workspace,
  connection,
}: {
  summary: SessionSummary;
  workspace: Workspace;
  connection: ConnectionModel;
}) {
  const selected =
    workspace.selected?.connection === connection && workspace.selected.sessionId === summary.sessionId;
  const live = connection.timelines.has(summary.sessionId);
  const [error, setError] = useState<string>();
  const open = async () => {
    setError(undefined);
    if (!live) {
      try {
        await connection.loadSession(summary);
      } catch (e) {
        return setError(errorMessage(e));
      }
    }
    workspace.select(connection, summary.sessionId);
  };
  return (
    <li class={`list-row${selected ? " selected" : ""}`} data-testid="session-row">
      <button class="list-open" onClick={open} title={summary.sessionId}>
        <span class="list-title">{summary.title || shortId(summary.sessionId)}</span>
        <span class="list-meta">
          {summary.model && <span>{summary.model}</span>}
          {summary.eventCount !== undefined && <span>{summary.eventCount} events</span>}
          <span title={summary.updatedAt}>{formatRelative(summary.updatedAt ?? summary.createdAt)}</span>
          {summary.ended && <span class="badge">ended</span>}
          {!live && <span class="badge muted">not loaded</span>}
        </span>
      </button>
      {error && <div class="form-error">{error}</div>}
    </li>
  );
}

const STATE_LABEL = { connecting: "connecting…", open: "connected", closed: "closed", failed: "failed" };

function ConnectionBlock({ connection, workspace }: { connection: ConnectionModel; workspace: Workspace }) {
  const info = connection.info;
  // Sessions opened here first, then the agent's list (which may know more, with metadata).
  const listed = new Map(connection.listed.map((s) => [s.sessionId, s]));
  for (const [sessionId, timeline] of connection.timelines) {
    if (!listed.has(sessionId))
      listed.set(sessionId, {
        sessionId,
        cwd: "",
        ...(timeline.title ? { title: timeline.title } : {}),
        metadata: {},
      });
  }
  return (
    <section class="connection" data-testid="connection">
      <header>
        <div>
          <strong>{connection.agentId}</strong>
          {info?.version && (
            <span class="muted">
              {" "}
              {info.name ?? ""} {info.version}
            </span>
          )}{" "}
          <span class="badge muted" data-testid="connection-transport">
            {TRANSPORT_LABEL[connection.transport]}
          </span>
        </div>
        <span class={`dot ${connection.state}`} title={connection.reason ?? STATE_LABEL[connection.state]}>
          {STATE_LABEL[connection.state]}
        </span>
      </header>
      {connection.reason && connection.state !== "open" && <div class="form-error">{connection.reason}</div>}
      <ul class="item-list">
        {[...listed.values()].map((summary) => (
          <SessionRow
            key={summary.sessionId}
            summary={summary}
            workspace={workspace}
            connection={connection}
          />
        ))}
      </ul>
      <div class="connection-actions">
        <button
          class="link"
          onClick={() => void connection.refreshSessions()}
          disabled={connection.state !== "open"}
        >
          refresh
        </button>
        <button class="link" onClick={() => void workspace.close(connection)}>
          {connection.state === "open" ? "disconnect" : "remove"}
        </button>
      </div>
    </section>
  );
}

function ServerConnectionRow({ info, workspace }: { info: ConnectionInfo; workspace: Workspace }) {
  const mine = workspace.mine(info.id);
  const ownedHere = mine !== undefined && mine.attached === undefined;
  return (
    <li class="list-row" data-testid="server-connection" data-connection-id={info.id}>
      <div class="list-open">
        <span class="list-title">
          {info.agentId} <span class="muted">{shortId(info.id)}</span>
          {ownedHere && <span class="badge">this page</span>}
          {mine?.attached !== undefined && <span class="badge">attached here</span>}
        </span>
        <span class="list-meta">
          <span>{info.state}</span>
          {info.pid !== null && <span>pid {info.pid}</span>}
          <span>{info.eventCount} events</span>
          <span title={info.createdAt}>started {formatRelative(info.createdAt)}</span>
          <span title={info.lastActivityAt}>active {formatRelative(info.lastActivityAt)}</span>
          {!info.attached && mine === undefined && <span class="badge muted">no reader</span>}
        </span>
        <ul class="plain-list">
          {info.sessions.map((s) => (
            <li key={s.sessionId} class="list-meta" title={s.sessionId} data-testid="server-session">
              <span>{s.title || shortId(s.sessionId)}</span>
              {s.model && <span>{s.model}</span>}
              <span>{s.eventCount} events</span>
              {s.createdAt && <span title={s.createdAt}>created {formatRelative(s.createdAt)}</span>}
              {s.updatedAt && <span title={s.updatedAt}>updated {formatRelative(s.updatedAt)}</span>}
              {s.ended && <span class="badge">ended</span>}
            </li>
          ))}
        </ul>
      </div>
      {mine === undefined && info.state === "open" && info.attached && (
        <span
          class="muted small-print"
          title="The server refuses a second reader; open it once its client released it"
        >
          read by another client
        </span>
      )}
      {mine === undefined && info.state === "open" && !info.attached && (
        <button
          class="link"
          onClick={() => workspace.attach(info)}
          data-testid="attach"
          title="Attach: its messages and permission requests come here"
        >
          open here
        </button>
      )}
    </li>
  );
}

function ServerConnectionsList({ workspace }: { workspace: Workspace }) {
  const list = workspace.onServer;
  useObservable(list);
  useEffect(() => list.watch(), [list]);
  return (
    <section data-testid="server-connections">
      <h3>
        On the server <span class="count">{list.connections.length}</span>
      </h3>
      <div class="connection-actions">
        <label class="small-print">
          <input
            type="checkbox"
            checked={list.live}
            onChange={(e) => list.setLive(e.currentTarget.checked)}
          />{" "}
          live
        </label>
        <button class="link" onClick={() => void list.refresh()}>
          refresh
        </button>
      </div>
      {list.error && <div class="form-error">{list.error}</div>}
      {list.connections.length === 0 && <div class="muted small-print">No agent connection runs.</div>}
      <ul class="item-list">
        {list.connections.map((info) => (
          <ServerConnectionRow key={info.id} info={info} workspace={workspace} />
        ))}
      </ul>
    </section>
  );
}

function Composer({ connection, sessionId }: { connection: ConnectionModel; sessionId: string }) {
  const timeline = connection.timeline(sessionId);
  const [text, setText] = useState("");
  const send = () => {
    if (!text.trim() || timeline.running) return;
    connection.prompt(sessionId, text);
    setText("");
  };
  const disabled = connection.state !== "open" || timeline.ended;
  return (
    <div class="composer">
      <textarea
        value={text}
        placeholder={
          disabled
            ? "This session cannot take prompts."
            : "Prompt the agent (Enter sends, Shift+Enter for a new line)"
        }
        disabled={disabled}
        onInput={(e) => setText(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === "Enter" && !e.shiftKey) {
            e.preventDefault();
            send();
          }
        }}
        data-testid="prompt"
      />
      <div class="composer-actions">
        {timeline.running ? (
          <button class="danger" onClick={() => void connection.cancel(sessionId)} data-testid="cancel">
            Cancel turn
          </button>
        ) : (
          <button class="primary" onClick={send} disabled={disabled || !text.trim()} data-testid="send">
            Send
          </button>
        )}
      </div>
    </div>
  );
}

function SessionPane({ connection, sessionId }: { connection: ConnectionModel; sessionId: string }) {
  const [tab, setTab] = useState<"conversation" | "raw">("conversation");
  const timeline = connection.timeline(sessionId);
  const envelopes = connection.envelopes.filter(
    (e) => e.sessionId === sessionId || e.sessionId === undefined,
  );
  return (
    <div class="pane">
      <SessionControls connection={connection} sessionId={sessionId} />
      <div class="tabs small">
        <button class={tab === "conversation" ? "active" : ""} onClick={() => setTab("conversation")}>
          Conversation
        </button>
        <button class={tab === "raw" ? "active" : ""} onClick={() => setTab("raw")} data-testid="raw-tab">
          Raw JSON-RPC <span class="count">{envelopes.length}</span>
        </button>
        {timeline.running && <span class="running">agent is working…</span>}
      </div>
      {tab === "conversation" ? (
        <Conversation connection={connection} items={timeline.items} />
      ) : (
        <RawView envelopes={envelopes} />
      )}
      <Composer connection={connection} sessionId={sessionId} />
    </div>
  );
}

export function SessionsView({ workspace }: { workspace: Workspace }) {
  useObservable(workspace);
  const [agents, setAgents] = useState<AgentDescription[]>([]);
  useEffect(() => {
    workspace.server.control.listAgents().then(setAgents, () => undefined);
  }, [workspace]);
  const selected = workspace.selected;
  return (
    <div class="split-view">
      <aside class="sidebar">
        <NewSessionForm workspace={workspace} agents={agents} />
        <h3>Connections</h3>
        {workspace.connections.length === 0 && (
          <div class="muted small-print">None yet: start a session above.</div>
        )}
        {workspace.connections.map((connection) => (
          <ConnectionBlock key={connection.key} connection={connection} workspace={workspace} />
        ))}
        <ServerConnectionsList workspace={workspace} />
      </aside>
      <main class="main">
        {selected ? (
          <SessionPane
            key={`${selected.connection.key}:${selected.sessionId}`}
            connection={selected.connection}
            sessionId={selected.sessionId}
          />
        ) : (
          <div class="placeholder">
            <h2>No session open</h2>
            <p>Pick an agent and start a session, or open one from the list.</p>
          </div>
        )}
      </main>
    </div>
  );
}
