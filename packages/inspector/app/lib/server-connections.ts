import type { ConnectionInfo } from "sandbox-agent";
import { errorMessage } from "./format.js";
import { Observable } from "./observable.js";
import type { ServerModel } from "./server.js";

/** How often the list is refreshed while the Sessions tab is open and live. */
const POLL_MS = 2000;

/** Every agent connection of the server (`GET /v2/connections`), whoever opened it; polled while watched. */
export class ServerConnections extends Observable {
  connections: ConnectionInfo[] = [];
  /** Refresh the list every few seconds while watched. */
  live = true;
  error: string | undefined;
  private refreshing: Promise<void> | undefined;

  constructor(readonly server: ServerModel) {
    super();
  }

  /** Refreshes the list now and every few seconds while `live`; returns the function that stops it. */
  watch(): () => void {
    void this.refresh();
    const timer = setInterval(() => this.live && void this.refresh(), POLL_MS);
    return () => clearInterval(timer);
  }

  setLive(live: boolean): void {
    this.live = live;
    if (live) void this.refresh();
    this.changed();
  }

  /** Refreshes the list (a refresh already under way is shared). */
  refresh(): Promise<void> {
    this.refreshing ??= this.load().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private async load(): Promise<void> {
    try {
      this.connections = (await this.server.control.connections.list()).reverse();
      this.error = undefined;
    } catch (error) {
      this.error = errorMessage(error);
    }
    this.changed();
  }
}
