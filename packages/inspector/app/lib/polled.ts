import { errorMessage } from "./format.js";
import { Observable } from "./observable.js";

/** How often a list is refreshed while its tab is open and live. */
const POLL_MS = 2000;

/** A list the page polls from the server while a tab shows it (**live**), or refreshes by hand. */
export abstract class PolledList extends Observable {
  /** Refresh every few seconds while watched. */
  live = true;
  loaded = false;
  error: string | undefined;
  private refreshing: Promise<void> | undefined;

  /** Fetches the list and stores it; errors are shown in the tab. */
  protected abstract load(): Promise<void>;

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

  /** Refreshes the list (a refresh already under way is shared: a slow server gets no pile-up). */
  refresh(): Promise<void> {
    this.refreshing ??= this.loadReporting().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private async loadReporting(): Promise<void> {
    try {
      await this.load();
      this.error = undefined;
    } catch (error) {
      this.error = errorMessage(error);
    }
    this.loaded = true;
    this.changed();
  }
}
