import { useEffect, useMemo, useState } from "preact/hooks";
import { forgetToken, storedToken, storeToken, takeTokenFromFragment } from "./lib/auth.js";
import { formatDuration } from "./lib/format.js";
import { useObservable } from "./lib/observable.js";
import { ProcessesModel } from "./lib/processes.js";
import { probe, ServerModel, type Probe } from "./lib/server.js";
import { Workspace } from "./lib/workspace.js";
import { AgentsView } from "./views/AgentsView.js";
import { FilesView } from "./views/FilesView.js";
import { ProcessesView } from "./views/ProcessesView.js";
import { SessionsView } from "./views/SessionsView.js";
import { TokenGate } from "./views/TokenGate.js";

type Tab = "sessions" | "agents" | "files" | "processes";

/** `#/tab/rest…`: the tab and, for files, the path; for processes, the open process' id. */
function parseRoute(hash: string): { tab: Tab; rest: string } {
  const m = /^#\/(sessions|agents|files|processes)(\/.*)?$/.exec(hash);
  return { tab: (m?.[1] as Tab | undefined) ?? "sessions", rest: m?.[2] ?? "/" };
}

function useRoute() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const onChange = () => setHash(location.hash);
    addEventListener("hashchange", onChange);
    return () => removeEventListener("hashchange", onChange);
  }, []);
  return parseRoute(hash);
}

function go(tab: Tab, rest = ""): void {
  location.hash = `#/${tab}${rest === "/" ? "" : rest}`;
}

function Inspector({ server, onSignOut }: { server: ServerModel; onSignOut?: () => void }) {
  useObservable(server);
  const workspace = useMemo(() => new Workspace(server), [server]);
  const processes = useMemo(() => new ProcessesModel(server), [server]);
  const route = useRoute();
  const health = server.health;
  const tabs: [Tab, string][] = [
    ["sessions", "Sessions"],
    ["agents", "Agents"],
    ["files", "Files"],
  ];
  if (server.processes) tabs.push(["processes", "Processes"]);
  return (
    <div class="app">
      <header class="topbar">
        <div class="brand">
          <span class="logo" aria-hidden="true">
            ◆
          </span>
          sandbox-agent <span class="muted">inspector</span>
        </div>
        <nav class="tabs" data-testid="nav">
          {tabs.map(([tab, label]) => (
            <button key={tab} class={route.tab === tab ? "active" : ""} onClick={() => go(tab)}>
              {label}
            </button>
          ))}
        </nav>
        <div class="server-status" data-testid="server-status">
          <span class={`dot ${server.offline ? "failed" : "open"}`}>
            {server.offline ? "unreachable" : "online"}
          </span>
          <span>v{health.version}</span>
          <span title="open agent connections on the server">{health.connections} connections</span>
          <span title="server uptime">up {formatDuration(health.uptimeMs)}</span>
          {onSignOut && (
            <button class="link" onClick={onSignOut}>
              sign out
            </button>
          )}
        </div>
      </header>
      {route.tab === "sessions" && <SessionsView workspace={workspace} />}
      {route.tab === "agents" && <AgentsView workspace={workspace} onSessionStarted={() => go("sessions")} />}
      {route.tab === "files" && (
        <FilesView server={server} path={route.rest} go={(path) => go("files", path)} />
      )}
      {route.tab === "processes" && (
        <ProcessesView
          model={processes}
          selectedId={decodeURIComponent(route.rest.slice(1)) || undefined}
          open={(id) => go("processes", id === undefined ? "" : `/${encodeURIComponent(id)}`)}
        />
      )}
    </div>
  );
}

export function App() {
  const [state, setState] = useState<{ probe: Probe; token: string | undefined }>();
  const check = async (token: string | undefined) => {
    const result = await probe(token);
    if (result.kind === "ok" && token) storeToken(token);
    setState({ probe: result, token });
  };
  useEffect(() => {
    takeTokenFromFragment();
    void check(storedToken());
    // A `#token=` link opened in this tab changes only the fragment: no reload.
    const onHashChange = () => void (takeTokenFromFragment() && check(storedToken()));
    addEventListener("hashchange", onHashChange);
    return () => removeEventListener("hashchange", onHashChange);
  }, []);
  const server = useMemo(
    () => (state?.probe.kind === "ok" ? new ServerModel(state.token, state.probe.health) : undefined),
    [state],
  );
  useEffect(() => () => server?.dispose(), [server]);
  if (!state) return <div class="loading">Connecting…</div>;
  if (state.probe.kind === "unauthorized")
    return <TokenGate rejected={state.probe.tokenSent} onToken={(token) => check(token)} />;
  if (state.probe.kind === "unreachable")
    return (
      <div class="gate">
        <div class="gate-card">
          <h1>Server unreachable</h1>
          <p class="form-error">{state.probe.message}</p>
          <button class="primary" onClick={() => void check(state.token)}>
            Retry
          </button>
        </div>
      </div>
    );
  const signOut = state.token
    ? () => {
        forgetToken();
        setState({ probe: { kind: "unauthorized", tokenSent: false }, token: undefined });
      }
    : undefined;
  return <Inspector server={server!} onSignOut={signOut} />;
}
