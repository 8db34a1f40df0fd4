import { ConnectionModel } from "./connection.js";
import type { ConnectionInfo } from "sandbox-agent";
import { Observable } from "./observable.js";
import type { ServerModel } from "./server.js";
import { ServerConnections } from "./server-connections.js";
import { storedTransport, storeTransport, type Transport } from "./transport.js";

export interface Selection {
  connection: ConnectionModel;
  sessionId: string;
}

/** The page's agent connections and the session on screen; kept while switching tabs. */
export class Workspace extends Observable {
  readonly connections: ConnectionModel[] = [];
  selected: Selection | undefined;
  /** Every connection of the server, this page's and other clients'. */
  readonly onServer: ServerConnections;
  /** The transport of the connections the page opens from now on (remembered across reloads). */
  transport: Transport = storedTransport();

  constructor(readonly server: ServerModel) {
    super();
    this.onServer = new ServerConnections(server);
  }

  /** This page's model of a server connection, if the page opened it or attached to it. */
  mine(id: string): ConnectionModel | undefined {
    return this.connections.find((c) => c.client.connectionId === id || c.attached === id);
  }

  /**
   * Opens a connection of the server here, attaching to it if another client opened it: its
   * stream (and permission requests) come to this page from then on; its first session is shown.
   */
  attach(info: ConnectionInfo): void {
    let connection = this.mine(info.id);
    if (connection === undefined) {
      connection = new ConnectionModel(this.server, info.agentId, "http", info.id);
      connection.subscribe(() => this.changed());
      this.connections.push(connection);
    }
    for (const session of info.sessions) {
      const timeline = connection.timeline(session.sessionId);
      if (session.title) timeline.title ??= session.title;
    }
    const first = info.sessions.find((s) => !s.ended) ?? info.sessions[0];
    if (first) this.select(connection, first.sessionId);
    else this.changed();
  }

  /** Open connections keep their transport; the next one the page opens uses this one. */
  setTransport(transport: Transport): void {
    this.transport = transport;
    storeTransport(transport);
    this.changed();
  }

  connect(agentId: string): ConnectionModel {
    const connection = new ConnectionModel(this.server, agentId, this.transport);
    connection.subscribe(() => this.changed());
    this.connections.push(connection);
    this.changed();
    return connection;
  }

  /**
   * An open (or opening) connection of this page to `agentId` over the chosen transport, else a
   * new one (never another client's).
   */
  connectionFor(agentId: string): ConnectionModel {
    const live = this.connections.find(
      (c) =>
        c.agentId === agentId &&
        c.attached === undefined &&
        c.transport === this.transport &&
        (c.state === "open" || c.state === "connecting"),
    );
    return live ?? this.connect(agentId);
  }

  async newSession(agentId: string, cwd: string, title?: string): Promise<void> {
    const connection = this.connectionFor(agentId);
    const sessionId = await connection.newSession(cwd, title);
    this.select(connection, sessionId);
  }

  select(connection: ConnectionModel, sessionId: string): void {
    this.selected = { connection, sessionId };
    this.changed();
  }

  async close(connection: ConnectionModel): Promise<void> {
    await connection.disconnect();
    this.connections.splice(this.connections.indexOf(connection), 1);
    if (this.selected?.connection === connection) this.selected = undefined;
    this.changed();
  }
}
