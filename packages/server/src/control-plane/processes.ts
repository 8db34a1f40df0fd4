import { z } from "zod";
import { ProblemError } from "../http/problem.js";
import { sendJson } from "../http/router.js";
import { ProcessError, type ProcessErrorKind } from "../processes/command.js";
import type { ProcessManager } from "../processes/manager.js";
import {
  createBodySchema,
  idParams,
  inputBodySchema,
  logsHeadersSchema,
  logsQuerySchema,
  processInfoSchema,
  resizeBodySchema,
  runBodySchema,
  runResultSchema,
  logsResultSchema,
  terminalQuerySchema,
  ticketSchema,
  type RunBody,
} from "./processes-schemas.js";
import { followLogs, sendLogs } from "./processes-logs.js";
import { defineRoute, type ResponseSpec, type RouteDef } from "./schema-route.js";

const TAGS = ["processes"];

/** HTTP status of each refusal of the process API. */
const STATUS: Record<ProcessErrorKind, number> = {
  "command-not-found": 400,
  "not-executable": 400,
  "bad-cwd": 400,
  "tty-unavailable": 501,
  "too-many-processes": 429,
  "shutting-down": 503,
  "unknown-process": 404,
  "process-exited": 409,
  "stdin-closed": 409,
  "not-a-terminal": 409,
};

/** The problem for a `ProcessError`; other errors pass through. */
export function processProblem(error: unknown): unknown {
  if (!(error instanceof ProcessError)) return error;
  const status = STATUS[error.kind];
  const title = error.kind.replace(
    /(^|-)(\w)/g,
    (_m, sep: string, c: string) => (sep ? " " : "") + c.toUpperCase(),
  );
  return new ProblemError(status, error.kind, title, error.message);
}

async function mapped<T>(work: () => Promise<T> | T): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw processProblem(error);
  }
}

const unknown: Record<number, ResponseSpec> = {
  404: { description: "No such process (`unknown-process`)." },
};
const refusals: Record<number, ResponseSpec> = {
  400: { description: "Invalid request, `command-not-found`, `not-executable` or `bad-cwd`." },
  429: { description: "Already `maxProcesses` processes running (`too-many-processes`)." },
};

function decode(data: string, encoding: "utf8" | "base64"): Buffer {
  return Buffer.from(data, encoding);
}

function checkInputSize(bytes: Buffer, limit: number): void {
  if (bytes.length > limit)
    throw new ProblemError(
      413,
      "payload-too-large",
      "Payload Too Large",
      `Input is ${bytes.length} bytes; one request may carry ${limit} (maxInputBytes). Send it in parts.`,
      { limit },
    );
}

/** JSON room for `bytes` of input written as base64, plus the other fields. */
function jsonBodyLimit(bytes: number): number {
  return Math.ceil((bytes * 4) / 3) + 64 * 1024;
}

async function run(manager: ProcessManager, body: RunBody) {
  const stdin = body.stdin === undefined ? undefined : decode(body.stdin, body.encoding);
  if (stdin) checkInputSize(stdin, manager.limits.maxInputBytes);
  const outcome = await mapped(() => manager.run({ ...body, stdin }));
  return {
    ...outcome,
    stdout: outcome.stdout.toString(body.encoding),
    stderr: outcome.stderr.toString(body.encoding),
    encoding: body.encoding,
  };
}

/** `/v2/processes`: run commands, background processes, their logs, terminals. */
export function processRoutes(manager: ProcessManager): RouteDef[] {
  const limits = manager.limits;
  const find = (id: string) => mapped(() => manager.get(id));
  return [
    defineRoute({
      method: "POST",
      path: "/v2/processes/run",
      summary: "Run a command to completion and return its output",
      tags: TAGS,
      body: runBodySchema(limits),
      maxBodyBytes: jsonBodyLimit(limits.maxInputBytes),
      responses: {
        200: { description: "The process exited (or was killed at timeoutMs).", schema: runResultSchema },
        ...refusals,
        413: { description: "stdin over maxInputBytes." },
      },
      handler: async ({ res, body }) => sendJson(res, 200, await run(manager, body)),
    }),
    defineRoute({
      method: "POST",
      path: "/v2/processes",
      summary: "Start a background process, optionally on a pseudo-terminal",
      tags: TAGS,
      body: createBodySchema,
      responses: {
        201: { description: "Started.", schema: processInfoSchema },
        ...refusals,
        501: { description: "tty requested but script(1) is not installed (`tty-unavailable`)." },
      },
      handler: async ({ res, body }) => {
        const tty = body.tty ? { cols: body.cols, rows: body.rows } : undefined;
        const proc = await mapped(() => manager.create({ ...body, tty }));
        sendJson(res, 201, proc.info());
      },
    }),
    defineRoute({
      method: "GET",
      path: "/v2/processes",
      summary: "Every process, running or exited (until deleted)",
      tags: TAGS,
      responses: {
        200: { description: "The processes.", schema: z.object({ processes: z.array(processInfoSchema) }) },
      },
      handler: ({ res }) => sendJson(res, 200, { processes: manager.list().map((p) => p.info()) }),
    }),
    defineRoute({
      method: "GET",
      path: "/v2/processes/{id}",
      summary: "One process",
      tags: TAGS,
      params: idParams,
      responses: { 200: { description: "The process.", schema: processInfoSchema }, ...unknown },
      handler: async ({ res, params }) => sendJson(res, 200, (await find(params.id)).info()),
    }),
    defineRoute({
      method: "POST",
      path: "/v2/processes/{id}/input",
      summary: "Write to the process' stdin (a terminal's keyboard), or close it",
      tags: TAGS,
      params: idParams,
      body: inputBodySchema,
      maxBodyBytes: jsonBodyLimit(limits.maxInputBytes),
      responses: {
        200: { description: "Written (the pipe took it).", schema: processInfoSchema },
        ...unknown,
        409: {
          description: "The process exited (`process-exited`) or its stdin is closed (`stdin-closed`).",
        },
        413: { description: "Over maxInputBytes." },
      },
      handler: async ({ res, params, body }) => {
        const proc = await find(params.id);
        const data = decode(body.data, body.encoding);
        checkInputSize(data, limits.maxInputBytes);
        await mapped(() => proc.write(data, body.eof));
        sendJson(res, 200, proc.info());
      },
    }),
    defineRoute({
      method: "POST",
      path: "/v2/processes/{id}/stop",
      summary: "SIGTERM the process group (and SIGHUP a terminal), SIGKILL after the grace period",
      description: `Answers once the process exited (at most killGraceMs, ${limits.killGraceMs} ms, later).`,
      tags: TAGS,
      params: idParams,
      responses: { 200: { description: "The exited process.", schema: processInfoSchema }, ...unknown },
      handler: async ({ res, params }) => {
        const proc = await find(params.id);
        await proc.stop(limits.killGraceMs);
        sendJson(res, 200, proc.info());
      },
    }),
    defineRoute({
      method: "POST",
      path: "/v2/processes/{id}/kill",
      summary: "SIGKILL the process group",
      tags: TAGS,
      params: idParams,
      responses: { 200: { description: "The exited process.", schema: processInfoSchema }, ...unknown },
      handler: async ({ res, params }) => {
        const proc = await find(params.id);
        await proc.kill();
        sendJson(res, 200, proc.info());
      },
    }),
    defineRoute({
      method: "DELETE",
      path: "/v2/processes/{id}",
      summary: "Kill the process if it runs and forget it and its logs",
      tags: TAGS,
      params: idParams,
      responses: { 204: { description: "Gone." }, ...unknown },
      handler: async ({ res, params }) => {
        await mapped(() => manager.remove(params.id));
        res.writeHead(204).end();
      },
    }),
    defineRoute({
      method: "GET",
      path: "/v2/processes/{id}/logs",
      summary: "The process' output with offsets; follow=true streams it as server-sent events",
      description:
        "Output is kept up to maxLogBytes per process (older chunks are dropped). With follow=true: `output` " +
        "events (`id` = seq) and a final `exit` event, then the stream ends; reconnect with Last-Event-ID to " +
        "resume (204 once the exit event was seen). While a follower is attached nothing it has not read is " +
        "dropped: the process is paused instead.",
      tags: TAGS,
      params: idParams,
      query: logsQuerySchema,
      headers: logsHeadersSchema,
      responses: {
        200: {
          description: "The output.",
          schema: logsResultSchema,
          alternatives: { "text/event-stream": "sse" },
        },
        204: { description: "follow=true from the exit event on: nothing more will come." },
        ...unknown,
        410: { description: "The cursor's output was dropped, or never existed." },
      },
      handler: async ({ req, res, params, query }) => {
        const proc = await find(params.id);
        const lastEventId = query.follow ? req.headers["last-event-id"] : undefined;
        const request = { ...query, lastEventId };
        if (query.follow) followLogs(res, proc, request, limits.stallMs);
        else sendLogs(res, proc, request);
      },
    }),
    defineRoute({
      method: "POST",
      path: "/v2/processes/{id}/terminal/resize",
      summary: "Set the terminal's window size (the process gets SIGWINCH)",
      tags: TAGS,
      params: idParams,
      body: resizeBodySchema,
      responses: {
        200: { description: "Resized.", schema: processInfoSchema },
        ...unknown,
        409: { description: "No terminal (`not-a-terminal`) or exited." },
      },
      handler: async ({ res, params, body }) => {
        const proc = await find(params.id);
        await mapped(() => proc.resize(body));
        sendJson(res, 200, proc.info());
      },
    }),
    defineRoute({
      method: "POST",
      path: "/v2/processes/{id}/terminal/ticket",
      summary: "A short-lived single-use ticket for the terminal WebSocket",
      description: `For browsers, which cannot send Authorization on a WebSocket: pass it as ?ticket= within ${limits.ticketTtlMs} ms.`,
      tags: TAGS,
      params: idParams,
      responses: { 201: { description: "The ticket.", schema: ticketSchema }, ...unknown },
      handler: async ({ res, params }) =>
        sendJson(res, 201, await mapped(() => manager.issueTicket(params.id))),
    }),
    defineRoute({
      method: "GET",
      path: "/v2/processes/{id}/terminal",
      summary: "WebSocket to a terminal process: output, input and resize",
      description:
        "Upgrade to a WebSocket. Authenticate with `Authorization: Bearer` or a `ticket`; browsers' Origin must be " +
        "allowed. The server first replays up to scrollbackBytes of output, then sends output as it comes, as " +
        'binary messages; when the process exits it sends the text message `{"type":"exit","exitCode","signal"}` ' +
        'and closes (1000). Send binary messages (or `{"type":"input","data"}`) as keyboard input and ' +
        '`{"type":"resize","cols","rows"}` to resize. Several viewers may attach.',
      tags: TAGS,
      params: idParams,
      query: terminalQuerySchema,
      responses: {
        101: { description: "Switching to the WebSocket protocol." },
        401: { description: "No valid token or ticket." },
        403: { description: "Origin not allowed." },
        ...unknown,
        409: { description: "The process has no terminal." },
        426: { description: "Not a WebSocket upgrade request." },
      },
      handler: () => {
        throw new ProblemError(
          426,
          "upgrade-required",
          "Upgrade Required",
          "This endpoint is a WebSocket: send `Connection: Upgrade` and `Upgrade: websocket`.",
          {},
          { upgrade: "websocket" },
        );
      },
    }),
  ];
}
