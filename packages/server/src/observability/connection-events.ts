import { shortId, type Logger } from "../log.js";
import type { AgentExit } from "../runtime/agent-process.js";
import type { ConnectionObserver, ObservedConnection } from "../runtime/observer.js";
import type { ServerMetrics } from "./metrics.js";

/**
 * Logs and counts connection lifecycles: opened (agent, pid), closed (reason, how long it was
 * open), the agent's exit (code, signal). Connection ids are capabilities: only their first 8
 * characters are logged.
 */
export function connectionEvents(logger: Logger, metrics: ServerMetrics): ConnectionObserver {
  const openedAt = new WeakMap<ObservedConnection, number>();
  const fields = (conn: ObservedConnection) => ({
    connection: shortId(conn.id),
    agent: conn.agentId,
    pid: conn.pid ?? null,
  });
  const openFor = (conn: ObservedConnection) => {
    const since = openedAt.get(conn);
    return since === undefined ? {} : { durationMs: Date.now() - since };
  };
  return {
    opened(conn) {
      openedAt.set(conn, Date.now());
      metrics.connectionsOpened.inc({ agent: conn.agentId });
      logger.info("connection opened", fields(conn));
    },
    closed(conn, reason) {
      // A connection that never opened (its initialize failed) is reported by the failed request.
      if (!openedAt.has(conn)) return;
      metrics.connectionsClosed.inc({ agent: conn.agentId, reason });
      logger.info("connection closed", { ...fields(conn), reason, ...openFor(conn) });
    },
    agentGone(conn, exit: AgentExit) {
      metrics.agentExits.inc({ agent: conn.agentId, how: exit.spawnError ? "spawn_failed" : exitKind(exit) });
      if (!openedAt.has(conn)) return;
      logger.info("agent exited", {
        ...fields(conn),
        code: exit.code,
        signal: exit.signal,
        ...openFor(conn),
      });
    },
    event() {
      metrics.events++;
    },
  };
}

function exitKind(exit: AgentExit): string {
  if (exit.signal !== null) return "signal";
  return exit.code === 0 ? "ok" : "error";
}
