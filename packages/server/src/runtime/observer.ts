import type { AgentExit } from "./agent-process.js";

/** What an observer may read of a connection. */
export interface ObservedConnection {
  readonly id: string;
  readonly agentId: string;
  readonly pid: number | undefined;
}

/**
 * What the runtime reports for logs and metrics (`src/observability/`), without knowing them.
 * Every method is called synchronously on the runtime's path: it must be cheap and must not throw.
 */
export interface ConnectionObserver {
  /** `initialize` succeeded: the connection is open. */
  opened(conn: ObservedConnection): void;
  /** The connection closed (`reason`: `deleted`, `idle`, `ended`, `shutdown`, …); its agent is being stopped. */
  closed(conn: ObservedConnection, reason: string): void;
  /** The connection's agent process is gone (whether the connection opened or not). */
  agentGone(conn: ObservedConnection, exit: AgentExit): void;
  /** One event entered a connection's outbound log (an agent message or one of the server's). */
  event(): void;
}
