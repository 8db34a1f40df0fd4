import type { AgentRegistry } from "../agents/registry.js";
import { sendJson, type Route } from "../http/router.js";
import type { Logger } from "../log.js";
import type { ConnectionRegistry } from "../runtime/connections.js";
import { VERSION } from "../version.js";

export interface ControlPlaneDeps {
  registry: AgentRegistry;
  connections: ConnectionRegistry;
  dataDir: string;
  workdir: string;
  logger: Logger;
}

const startedAt = Date.now();

export function controlPlaneRoutes(deps: ControlPlaneDeps): Route[] {
  return [
    {
      method: "GET",
      path: "/v2/health",
      handler: ({ res }) =>
        sendJson(res, 200, {
          status: "ok",
          version: VERSION,
          uptimeMs: Date.now() - startedAt,
          connections: deps.connections.size,
        }),
    },
  ];
}
