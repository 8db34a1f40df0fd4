import { z } from "zod";
import type { Health } from "./health.js";
import { HEALTH_PATH } from "./health.js";
import { describeRoute, type DocumentedRoute } from "./schema-route.js";

// `GET /v2/health` is served by `health.ts` without zod; this schema only describes it.
const healthSchema = z.object({
  status: z.literal("ok"),
  version: z.string(),
  uptimeMs: z.number().int().nonnegative(),
  connections: z.number().int().nonnegative().describe("Open /v2/rpc connections"),
  workdir: z.string().describe("Working directory of agent processes (default cwd of new sessions)"),
  fsRoot: z.string().describe("Root of the filesystem API: /v2/fs/* paths are relative to it"),
}) satisfies z.ZodType<Health>;

export const healthDocumentation: DocumentedRoute = describeRoute({
  method: "GET",
  path: HEALTH_PATH,
  summary: "Server liveness, version, open connections, the agents' workdir and the file API's root",
  tags: ["server"],
  responses: { 200: { description: "The server is up.", schema: healthSchema } },
});
