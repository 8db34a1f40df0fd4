import type { Route } from "../http/router.js";
import type { ProcessManager } from "../processes/manager.js";
import type { ConnectionRegistry } from "../runtime/connections.js";
import type { ServerMetrics } from "./metrics.js";

export const METRICS_PATH = "/v2/metrics";

/**
 * `GET /v2/metrics` (Prometheus text format), behind the same token and Origin checks as every
 * endpoint. The route is there from start; its formatter loads with the first scrape.
 */
export function metricsRoute(deps: {
  metrics: ServerMetrics;
  connections: ConnectionRegistry;
  processes: ProcessManager;
}): Route {
  return {
    method: "GET",
    path: METRICS_PATH,
    handler: async ({ res }) => {
      const { exposition, CONTENT_TYPE } = await import("./prometheus.js");
      const body = exposition(deps.metrics, {
        connectionsOpen: deps.connections.size,
        agentsRunning: deps.connections.agentsAlive,
        sseReaders: deps.connections.all().filter((c) => c.hasReader).length,
        processesRunning: deps.processes.runningCount,
      });
      res.writeHead(200, {
        "content-type": CONTENT_TYPE,
        "content-length": Buffer.byteLength(body),
        "cache-control": "no-store",
      });
      res.end(body);
    },
  };
}
