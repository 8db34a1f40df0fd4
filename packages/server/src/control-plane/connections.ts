import { z } from "zod";
import { ProblemError } from "../http/problem.js";
import { sendJson } from "../http/router.js";
import type { ConnectionRegistry } from "../runtime/connections.js";
import { defineRoute, type RouteDef } from "./schema-route.js";

const TAGS = ["connections"];

const iso = z.string().describe("ISO 8601");

const sessionSchema = z.object({
  sessionId: z.string(),
  title: z.string().nullable().describe("The client's title (set_metadata), else the agent's"),
  cwd: z.string().nullable(),
  model: z.string().nullable(),
  createdAt: iso.nullable().describe("When the server first saw the session"),
  updatedAt: iso.nullable().describe("Last update, metadata or lifecycle change"),
  ended: z.boolean(),
  eventCount: z.number().int().describe("`session/update` notifications the agent sent for it"),
  metadata: z.record(z.string(), z.unknown()).describe('Client metadata (`_meta["sandboxagent.dev"]`)'),
});

export const connectionSchema = z.object({
  id: z.string().describe("The connection id (`Acp-Connection-Id`)"),
  agentId: z.string(),
  state: z.enum(["initializing", "open", "ended", "closed"]),
  pid: z.number().int().nullable().describe("The agent's process id while it runs"),
  createdAt: iso,
  lastActivityAt: iso.describe("Last request, answer or stream change; the idle timer counts from it"),
  attached: z.boolean().describe("Whether a client holds the event stream now"),
  eventCount: z.number().int().describe("Events on the connection's stream so far"),
  lastEventId: z.string().nullable().describe("Id of the last event (`Last-Event-ID` form)"),
  protocolVersion: z.number().int().nullable(),
  exitCode: z.number().int().nullable(),
  signal: z.string().nullable(),
  sessions: z.array(sessionSchema),
});

const idParams = z.object({ id: z.string().describe("Connection id") });

/**
 * `GET /v2/connections[/{id}]`: what the server's agent connections are doing, read from
 * copies the runtime makes (`ConnectionRegistry.snapshots`), so nothing here can change them.
 */
export function connectionRoutes(connections: ConnectionRegistry): RouteDef[] {
  return [
    defineRoute({
      method: "GET",
      path: "/v2/connections",
      summary: "Every connection of the server (one agent process each) with its sessions",
      description:
        "Includes connections other clients opened. To follow one, attach to it (`GET /v2/rpc` with " +
        "`Acp-Connection-Id`): the stream has one reader at a time (`attached`); a second one is " +
        "refused (409) unless it resumes with `Last-Event-ID`, which takes the stream over.",
      tags: TAGS,
      responses: {
        200: {
          description: "The connections, oldest first.",
          schema: z.object({ connections: z.array(connectionSchema) }),
        },
      },
      handler: ({ res }) => sendJson(res, 200, { connections: connections.snapshots() }),
    }),
    defineRoute({
      method: "GET",
      path: "/v2/connections/{id}",
      summary: "One connection with its sessions",
      tags: TAGS,
      params: idParams,
      responses: {
        200: { description: "The connection.", schema: connectionSchema },
        404: { description: "No such connection (closed, expired, or never opened)." },
      },
      handler: ({ res, params }) => {
        const snapshot = connections.snapshot(params.id);
        if (snapshot === undefined)
          throw new ProblemError(
            404,
            "unknown-connection",
            "Unknown Connection",
            `No connection ${params.id}: it was closed, expired or never opened (GET /v2/connections lists them).`,
          );
        sendJson(res, 200, snapshot);
      },
    }),
  ];
}
