import { ConnectionModel } from "./connection.js";
import { Observable } from "./observable.js";
import type { ServerModel } from "./server.js";

export interface Selection {
  connection: ConnectionModel;
  sessionId: string;
}

/** The page's agent connections and the session on screen; kept while switching tabs. */
export class Workspace extends Observable {
  readonly connections: ConnectionModel[] = [];
  selected: Selection | undefined;

  constructor(readonly server: ServerModel) {
    super();
  }

  connect(agentId: string): ConnectionModel {
    const connection = new ConnectionModel(this.server, agentId);
    connection.subscribe(() => this.changed());
    this.connections.push(connection);
    this.changed();
    return connection;
  }

  /** An open (or opening) connection to `agentId`, else a new one. */
  connectionFor(agentId: string): ConnectionModel {
    const live = this.connections.find(
      (c) => c.agentId === agentId && (c.state === "open" || c.state === "connecting"),
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
