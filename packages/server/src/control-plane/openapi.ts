import { z } from "zod";
import { sendJson } from "../http/router.js";
import { VERSION } from "../version.js";
import { defineRoute, openApiDocument, type DocumentedRoute, type RouteDef } from "./schema-route.js";

const INFO = {
  title: "sandbox-agent",
  version: VERSION,
  description:
    "Control plane (health, agents, filesystem) and ACP transport (/v2/rpc) of the sandbox-agent server. Every error is application/problem+json (RFC 9457).",
};

/** `GET /v2/openapi.json`, describing `routes` plus itself. */
export function openApiRoute(routes: readonly DocumentedRoute[]): RouteDef {
  const self = defineRoute({
    method: "GET",
    path: "/v2/openapi.json",
    summary: "This OpenAPI 3.1 document",
    tags: ["server"],
    responses: {
      200: { description: "The OpenAPI document", schema: z.looseObject({ openapi: z.string() }) },
    },
    handler: ({ res }) => {
      // Built on first request, not at start (start-up time and idle memory), then kept: the route
      // table does not change while the server runs.
      document ??= openApiDocument([...routes, self], INFO);
      sendJson(res, 200, document);
    },
  });
  let document: ReturnType<typeof openApiDocument> | undefined;
  return self;
}
