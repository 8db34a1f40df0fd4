import { describeRoute, type DocumentedRoute } from "../control-plane/schema-route.js";
import { METRICS_PATH } from "./metrics-route.js";

// `GET /v2/metrics` is served without zod (`metrics-route.ts`); this only describes it.
export const metricsDocumentation: DocumentedRoute = describeRoute({
  method: "GET",
  path: METRICS_PATH,
  summary: "Server metrics in the Prometheus text format",
  description:
    "Connections open, opened and closed; agent processes running and their exits; events sent; HTTP " +
    "requests by method, route and status, their latency as a histogram, bytes in and out; processes of " +
    "the process API; and the standard process_* metrics. Content-Type text/plain; version=0.0.4.",
  tags: ["server"],
  responses: { 200: { description: "The metrics.", schema: "text" } },
});
