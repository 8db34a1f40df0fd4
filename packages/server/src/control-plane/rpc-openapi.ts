import { z } from "zod";
import { ticketSchema } from "./processes-schemas.js";
import { describeRoute, type DocumentedRoute } from "./schema-route.js";

// `/v2/rpc` is served by `transport/rpc-routes.ts` with its own parsing; these schemas only describe it.

const jsonRpcMessage = z
  .looseObject({
    jsonrpc: z.literal("2.0"),
    id: z.union([z.string(), z.number()]).optional(),
    method: z.string().optional(),
    params: z.unknown().optional(),
    result: z.unknown().optional(),
    error: z.unknown().optional(),
  })
  .describe("One ACP JSON-RPC 2.0 message (request, notification or response)");

const connectionHeaders = z.object({
  "acp-connection-id": z
    .string()
    .optional()
    .describe("Connection id from the initialize response (x-acp-connection-id is accepted too)"),
  "acp-session-id": z
    .string()
    .optional()
    .describe("Session the message belongs to; must match params.sessionId"),
  "acp-protocol-version": z.string().optional().describe("Must equal the negotiated protocol version"),
});

const connectionIdHeader = {
  description: "Id of the new connection; send it back as Acp-Connection-Id",
  schema: z.string(),
};

const tags = ["rpc"];

export const rpcDocumentation: DocumentedRoute[] = [
  describeRoute({
    method: "POST",
    path: "/v2/rpc",
    summary: "Send an ACP message",
    description:
      'An `initialize` request without a connection id starts the agent named by params._meta["sandboxagent.dev"].agent and answers 200 with its result; every other message is accepted with 202 and answered on the SSE stream.',
    tags,
    headers: connectionHeaders,
    body: jsonRpcMessage,
    responses: {
      200: {
        description: "initialize result",
        schema: jsonRpcMessage,
        headers: { "acp-connection-id": connectionIdHeader, "x-acp-connection-id": connectionIdHeader },
      },
      202: { description: "Accepted; the answer arrives on GET /v2/rpc" },
      404: { description: "Unknown or closed connection" },
      410: { description: "The agent process has exited" },
      415: { description: "The body is not application/json" },
      502: { description: "The agent failed to start or rejected initialize" },
      504: { description: "The agent did not answer initialize in time" },
    },
  }),
  describeRoute({
    method: "GET",
    path: "/v2/rpc",
    summary: "Stream the connection's messages (SSE), or upgrade to a WebSocket",
    description:
      "Events carry ids `<epoch>.<seq>`; reconnect with Last-Event-ID to replay what was missed. The first event is a priming event with empty data. " +
      "With `Upgrade: websocket` the connection travels over one WebSocket instead, one JSON-RPC message per text frame: without a connection id the first frame must be `initialize`; with one (header, or `?connectionId=` and `?lastEventId=`) the socket resumes after that event. Authenticate with Authorization or a `?ticket=` from POST /v2/rpc/ticket.",
    tags,
    headers: z.object({
      accept: z.string().describe("Must accept text/event-stream"),
      "acp-connection-id": z.string().describe("Connection id (x-acp-connection-id is accepted too)"),
      "acp-session-id": z.string().optional().describe("Stream only this session's messages"),
      "last-event-id": z.string().optional().describe("Resume after this event"),
    }),
    responses: {
      200: { description: "Event stream", schema: "sse" },
      404: { description: "Unknown or closed connection" },
      406: { description: "Accept does not include text/event-stream" },
      409: { description: "Another reader is attached" },
      410: { description: "Last-Event-ID can no longer be replayed" },
    },
  }),
  describeRoute({
    method: "POST",
    path: "/v2/rpc/ticket",
    summary: "A short-lived single-use ticket for the /v2/rpc WebSocket",
    description:
      "For browsers, which cannot send Authorization on a WebSocket: pass it as ?ticket= on the upgrade within 30 s.",
    tags,
    responses: { 201: { description: "The ticket.", schema: ticketSchema } },
  }),
  describeRoute({
    method: "DELETE",
    path: "/v2/rpc",
    summary: "Close a connection and stop its agent",
    tags,
    headers: z.object({ "acp-connection-id": z.string().describe("Connection id") }),
    responses: {
      202: { description: "Closing" },
      404: { description: "Unknown or closed connection" },
    },
  }),
];
