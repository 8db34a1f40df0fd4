import type { ConnectionInfo } from "sandbox-agent";
import { PolledList } from "./polled.js";
import type { ServerModel } from "./server.js";

/** Every agent connection of the server (`GET /v2/connections`), whoever opened it, newest first. */
export class ServerConnections extends PolledList {
  connections: ConnectionInfo[] = [];

  constructor(readonly server: ServerModel) {
    super();
  }

  protected async load(): Promise<void> {
    this.connections = (await this.server.control.connections.list()).reverse();
  }
}
