/**
 * The server's agent connections (`GET /v2/connections`), whoever opened them: what each agent
 * is doing, for dashboards and the inspector. Read-only; to follow one nobody reads
 * (`attached: false`), attach to it (the client's `attach` option).
 */
import type { HttpTransport } from "./http.js";

/** A session of a listed connection, with the metadata the server keeps (as `session/list` shows it). */
export interface ConnectionSessionInfo {
  sessionId: string;
  /** The client's title (`setMetadata`), else the agent's. */
  title: string | null;
  cwd: string | null;
  model: string | null;
  /** ISO 8601: when the server first saw the session. */
  createdAt: string | null;
  /** ISO 8601: last update, metadata or lifecycle change. */
  updatedAt: string | null;
  ended: boolean;
  /** `session/update` notifications the agent sent for it. */
  eventCount: number;
  /** Client metadata (`_meta["sandboxagent.dev"]`). */
  metadata: Record<string, unknown>;
}

export interface ConnectionInfo {
  /** The connection id (`Acp-Connection-Id`). */
  id: string;
  agentId: string;
  state: "initializing" | "open" | "ended" | "closed";
  /** The agent's process id while it runs. */
  pid: number | null;
  createdAt: string;
  /** Last request, answer or stream change: the server's idle timer counts from it. */
  lastActivityAt: string;
  /** Whether a client holds the connection's event stream now. */
  attached: boolean;
  /** Events on the connection's stream so far. */
  eventCount: number;
  /** Id of the last event (`Last-Event-ID` form), null before the first. */
  lastEventId: string | null;
  protocolVersion: number | null;
  exitCode: number | null;
  signal: string | null;
  sessions: ConnectionSessionInfo[];
}

export class Connections {
  constructor(private readonly http: HttpTransport) {}

  /** Every connection of the server, oldest first. */
  async list(): Promise<ConnectionInfo[]> {
    const body = await this.http.json<{ connections: ConnectionInfo[] }>({
      method: "GET",
      path: "/v2/connections",
    });
    return body.connections;
  }

  /** One connection; `SandboxAgentHttpError` 404 once it is closed. */
  get(id: string): Promise<ConnectionInfo> {
    return this.http.json<ConnectionInfo>({
      method: "GET",
      path: `/v2/connections/${encodeURIComponent(id)}`,
    });
  }
}
