import { z } from "zod";
import { sendJson } from "../http/router.js";
import type { ConnectionRegistry } from "../runtime/connections.js";
import { VERSION } from "../version.js";
import { defineRoute, type RouteDef } from "./schema-route.js";

const healthSchema = z.object({
  status: z.literal("ok"),
  version: z.string(),
  uptimeMs: z.number().int().nonnegative(),
  connections: z.number().int().nonnegative().describe("Open /v2/rpc connections"),
});

const startedAt = Date.now();

export function healthRoutes(deps: { connections: ConnectionRegistry }): RouteDef[] {
  return [
    defineRoute({
      method: "GET",
      path: "/v2/health",
      summary: "Server liveness, version and open connection count",
      tags: ["server"],
      responses: { 200: { description: "The server is up.", schema: healthSchema } },
      handler: ({ res }) =>
        sendJson(res, 200, {
          status: "ok",
          version: VERSION,
          uptimeMs: Date.now() - startedAt,
          connections: deps.connections.size,
        } satisfies z.output<typeof healthSchema>),
    }),
  ];
}
