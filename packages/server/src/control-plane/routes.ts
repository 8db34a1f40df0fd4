import type { AgentRegistry } from "../agents/registry.js";
import type { Route } from "../http/router.js";
import type { Logger } from "../log.js";
import type { ProcessManager } from "../processes/manager.js";
import type { ConnectionRegistry } from "../runtime/connections.js";
import { agentRoutes } from "./agents.js";
import { connectionRoutes } from "./connections.js";
import { fsRoutes } from "./fs.js";
import { metricsDocumentation } from "../observability/metrics-openapi.js";
import { healthDocumentation } from "./health-openapi.js";
import { openApiRoute } from "./openapi.js";
import { processRoutes } from "./processes.js";
import { rpcDocumentation } from "./rpc-openapi.js";
import type { DocumentedRoute } from "./schema-route.js";

export interface ControlPlaneDeps {
  registry: AgentRegistry;
  connections: ConnectionRegistry;
  dataDir: string;
  workdir: string;
  /** Root of the filesystem API (`/v2/fs/*`). */
  fsRoot: string;
  /** Largest upload `PUT /v2/fs/file` accepts, in bytes (default: unlimited). */
  fsMaxUploadBytes?: number;
  /** Processes and terminals (`/v2/processes`). */
  processes: ProcessManager;
  logger: Logger;
}

function isDocumented(route: Route): route is Route & DocumentedRoute {
  return "operation" in route;
}

/**
 * The control-plane routes the server loads on first use (agents, filesystem, processes), plus
 * `GET /v2/openapi.json` documenting them, `/v2/health`, `/v2/metrics` and `/v2/rpc` (served from start).
 */
export function controlPlaneRoutes(deps: ControlPlaneDeps): Route[] {
  const routes: Route[] = [
    // Agent routes (GET /v2/agents, POST /v2/agents/{id}/install, …) are owned by agents.ts.
    ...agentRoutes(deps),
    ...fsRoutes({ root: deps.fsRoot, maxUploadBytes: deps.fsMaxUploadBytes, logger: deps.logger }),
    ...processRoutes(deps.processes),
    ...connectionRoutes(deps.connections),
  ];
  // Routes built with defineRoute() document themselves; plain Routes are left out of the document.
  return [
    ...routes,
    openApiRoute([
      ...rpcDocumentation,
      healthDocumentation,
      metricsDocumentation,
      ...routes.filter(isDocumented),
    ]),
  ];
}
