import type { ServerResponse } from "node:http";
import { z } from "zod";
import { lastAdvertisement } from "../extensions/last-initialize.js";
import { installState } from "../agents/install.js";
import { installLogged } from "../agents/install-progress.js";
import { acceptedClientEnv } from "../agents/launch.js";
import type { AgentRegistry } from "../agents/registry.js";
import type { AgentDefinition } from "../agents/types.js";
import { ProblemError, problems } from "../http/problem.js";
import { sendJson } from "../http/router.js";
import type { Logger } from "../log.js";
import { SseResponse, sseEvent } from "../transport/sse.js";
import { defineRoute, type RouteDef } from "./schema-route.js";

export interface AgentRoutesDeps {
  registry: AgentRegistry;
  dataDir: string;
  logger: Logger;
}

const packageSchema = z.object({ name: z.string(), version: z.string() });

const advertisementSchema = z
  .object({
    at: z.string().describe("When the agent answered that initialize (ISO 8601)"),
    protocolVersion: z.unknown(),
    agentCapabilities: z.unknown(),
    authMethods: z.unknown(),
    agentInfo: z.unknown(),
  })
  .describe("The agent's last initialize result on this data directory");

const agentInfoSchema = z.object({
  id: z.string(),
  name: z.string(),
  source: z.enum(["builtin", "config"]),
  installable: z.boolean().describe("Installed from npm by install-agent / POST …/install"),
  installed: z.boolean(),
  version: z.string().nullable().describe("Installed version of the agent's npm package"),
  packages: z.array(packageSchema).describe("What install installs by default (pinned versions)"),
  env: z
    .array(z.string())
    .describe(
      "Variables the agent takes from the server's environment (passEnv); a request may set them too",
    ),
  clientEnv: z
    .array(z.string())
    .describe(
      'Variables a client may set in initialize (env and clientEnv of the entry, --allow-client-env); "*": any',
    ),
  notes: z.string().nullable(),
  lastInitialize: advertisementSchema.nullable(),
});

/** One agent as `GET /v2/agents` shows it. */
export type AgentInfo = z.output<typeof agentInfoSchema>;

const installResultSchema = z.object({
  agent: z.string(),
  version: z.string().nullable().describe("null for agents that need no install"),
  alreadyInstalled: z.boolean(),
  durationMs: z.number().int().nonnegative(),
  packages: z.array(packageSchema),
  state: agentInfoSchema,
});

const idParams = z.object({ id: z.string().describe("Agent id") });
const installBody = z
  .strictObject({ version: z.string().min(1).max(100).optional().describe("Overrides the pinned version") })
  .optional();

export function describeAgent(agent: AgentDefinition, dataDir: string): AgentInfo {
  const state = installState(agent);
  return {
    id: agent.id,
    name: agent.name,
    source: agent.source,
    installable: state.installable,
    installed: state.installed,
    version: state.version,
    packages: agent.install?.packages ?? [],
    env: agent.spec.passEnv ?? [],
    clientEnv: acceptedClientEnv(agent),
    notes: agent.notes ?? null,
    lastInitialize: lastAdvertisement(dataDir, agent.id),
  };
}

export function agentRoutes(deps: AgentRoutesDeps): RouteDef[] {
  const find = (id: string): AgentDefinition => {
    const agent = deps.registry.get(id);
    if (!agent)
      throw problems.notFound(
        `Unknown agent ${JSON.stringify(id)}. Known: ${deps.registry.ids().join(", ")}.`,
      );
    return agent;
  };
  return [
    defineRoute({
      method: "GET",
      path: "/v2/agents",
      summary: "Agents this server can run, with install state and last advertised capabilities",
      tags: ["agents"],
      responses: {
        200: { description: "Every agent.", schema: z.object({ agents: z.array(agentInfoSchema) }) },
      },
      handler: ({ res }) =>
        sendJson(res, 200, { agents: deps.registry.list().map((a) => describeAgent(a, deps.dataDir)) }),
    }),
    defineRoute({
      method: "GET",
      path: "/v2/agents/{id}",
      summary: "One agent",
      tags: ["agents"],
      params: idParams,
      responses: {
        200: { description: "The agent.", schema: agentInfoSchema },
        404: { description: "No agent with that id." },
      },
      handler: ({ res, params }) => sendJson(res, 200, describeAgent(find(params.id), deps.dataDir)),
    }),
    defineRoute({
      method: "POST",
      path: "/v2/agents/{id}/install",
      summary: "Install an agent from npm into the data directory (idempotent)",
      description:
        "With `Accept: text/event-stream` npm's progress is streamed as `progress` events, then one `result` or " +
        "`error` event (data: the result, or `{problem}`); `application/x-ndjson` streams the same as `{type, …}` lines. " +
        "Otherwise the JSON result comes when the install is done.",
      tags: ["agents"],
      params: idParams,
      body: installBody,
      responses: {
        200: {
          description: "Installed (or already installed).",
          schema: installResultSchema,
          alternatives: { "text/event-stream": "sse" },
        },
        404: { description: "No agent with that id." },
        502: { description: "npm failed (`agent-install-failed`, with npm's last output lines)." },
        503: { description: "The npm registry cannot be reached (`registry-unreachable`)." },
      },
      handler: ({ req, res, params, body }) =>
        install(res, find(params.id), body?.version, streamFormat(req.headers.accept), deps),
    }),
  ];
}

type StreamFormat = "sse" | "ndjson" | "json";

function streamFormat(accept: string | undefined): StreamFormat {
  const types = (accept ?? "").split(",").map((p) => p.split(";")[0]!.trim().toLowerCase());
  if (types.includes("text/event-stream")) return "sse";
  if (types.includes("application/x-ndjson")) return "ndjson";
  return "json";
}

/** Writes install events in the format the client asked for: SSE `event: progress|result|error`, or NDJSON `{type,…}`. */
function eventWriter(res: ServerResponse, format: "sse" | "ndjson") {
  if (format === "sse") {
    const sse = new SseResponse(res, { cacheControl: "no-store" });
    sse.open();
    return (type: InstallEvent, data: Record<string, unknown>) =>
      sse.write(sseEvent(JSON.stringify(data), undefined, type));
  }
  res.writeHead(200, {
    "content-type": "application/x-ndjson",
    "cache-control": "no-store",
    "x-accel-buffering": "no",
  });
  return (type: InstallEvent, data: Record<string, unknown>) => {
    if (!res.writableEnded) res.write(JSON.stringify({ type, ...data }) + "\n");
  };
}

type InstallEvent = "progress" | "result" | "error";

async function install(
  res: ServerResponse,
  agent: AgentDefinition,
  version: string | undefined,
  format: StreamFormat,
  deps: AgentRoutesDeps,
): Promise<void> {
  if (format === "json") {
    const result = await installLogged(agent, deps.logger, { version });
    return sendJson(res, 200, { ...result, state: describeAgent(agent, deps.dataDir) });
  }
  // Headers are sent before npm runs, so a failure can only be reported as an event.
  const send = eventWriter(res, format);
  try {
    const result = await installLogged(agent, deps.logger, {
      version,
      onProgress: (line) => send("progress", { line }),
    });
    send("result", { ...result, state: describeAgent(agent, deps.dataDir) });
  } catch (error) {
    const problem = error instanceof ProblemError ? error.problem : problems.internal(String(error)).problem;
    send("error", { problem });
  }
  res.end();
}
