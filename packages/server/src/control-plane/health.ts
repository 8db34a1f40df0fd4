import path from "node:path";
import { sendJson, type Route } from "../http/router.js";
import type { ConnectionRegistry } from "../runtime/connections.js";
import { VERSION } from "../version.js";

/** The body of `GET /v2/health` (documented by `health-openapi.ts`). */
export interface Health {
  status: "ok";
  version: string;
  uptimeMs: number;
  connections: number;
  /** Working directory of agent processes: the default `cwd` for new sessions. */
  workdir: string;
  /** Root of the filesystem API: the directory `/v2/fs/*` paths (and `/`) are relative to. */
  fsRoot: string;
}

export const HEALTH_PATH = "/v2/health";

const startedAt = Date.now();

/**
 * `GET /v2/health`. A plain route, loaded at start: it has no input to validate, and supervisors
 * poll it right after start, before anything else has loaded the control plane.
 */
export function healthRoute(deps: {
  connections: ConnectionRegistry;
  workdir: string;
  fsRoot: string;
}): Route {
  return {
    method: "GET",
    path: HEALTH_PATH,
    handler: ({ res }) =>
      sendJson(res, 200, {
        status: "ok",
        version: VERSION,
        uptimeMs: Date.now() - startedAt,
        connections: deps.connections.size,
        workdir: path.resolve(deps.workdir),
        fsRoot: path.resolve(deps.fsRoot),
      } satisfies Health),
  };
}
