import { z } from "zod";
import type { ProcessLimits } from "../processes/limits.js";
import { booleanQuery } from "./schema-route.js";

const text = (what: string) =>
  z.string().refine((value) => !value.includes("\0"), `${what} must not contain NUL bytes`);

export const encodingSchema = z
  .enum(["utf8", "base64"])
  .default("utf8")
  .describe("How byte strings are written in JSON: UTF-8 text, or base64 for exact bytes");

/** Fields every way of starting a process shares. */
function startFields() {
  return {
    command: text("command")
      .min(1)
      .max(4096)
      .describe("Program to run, looked up in PATH (no shell: use `sh` with `-c` for a command line)"),
    args: z
      .array(text("args").max(128 * 1024))
      .max(4096)
      .optional(),
    cwd: text("cwd")
      .max(4096)
      .optional()
      .describe("Working directory; relative to the server's --workdir, which is the default"),
    env: z
      .record(z.string().regex(/^[^=\0]+$/, "must be a variable name without = or NUL"), text("env"))
      .optional()
      .describe("Variables added to the minimal base environment (PATH, HOME, locale…)"),
  };
}

const size = (what: string, fallback: number) =>
  z.number().int().min(1).max(1000).default(fallback).describe(`Terminal ${what}`);

export function runBodySchema(limits: ProcessLimits) {
  return z.strictObject({
    ...startFields(),
    stdin: z
      .string()
      .optional()
      .describe("Written to stdin, which is then closed (closed at once without it)"),
    encoding: encodingSchema,
    timeoutMs: z
      .number()
      .int()
      .positive()
      .max(limits.maxRunTimeoutMs)
      .optional()
      .describe(`Kill the process group after this long (default ${limits.runTimeoutMs})`),
    maxOutputBytes: z
      .number()
      .int()
      .nonnegative()
      .max(limits.maxRunOutputBytes)
      .optional()
      .describe(`Bytes kept per stream (default ${limits.runOutputBytes}); the rest is dropped`),
  });
}

export const createBodySchema = z.strictObject({
  ...startFields(),
  tty: z.boolean().default(false).describe("Run on a pseudo-terminal (stdout and stderr merged into stdout)"),
  cols: size("columns", 80),
  rows: size("rows", 24),
});

export const inputBodySchema = z.strictObject({
  data: z.string().default("").describe("Bytes for stdin (the terminal's keyboard)"),
  encoding: encodingSchema,
  eof: z
    .boolean()
    .default(false)
    .describe("Close stdin after `data`; on a terminal this sends the EOF character (^D) instead"),
});

export const resizeBodySchema = z.strictObject({ cols: size("columns", 80), rows: size("rows", 24) });

export const idParams = z.object({ id: z.string().describe("Process id") });

const seq = z
  .string()
  .regex(/^\d{1,15}$/, "must be a sequence number")
  .transform(Number);

export const logsQuerySchema = z.object({
  since: seq.optional().describe("Only chunks after this seq (the `seq` of the last chunk you have)"),
  stream: z.enum(["stdout", "stderr"]).optional().describe("Only this stream (default both)"),
  encoding: encodingSchema,
  follow: booleanQuery(false, "Stream as server-sent events until the process exits"),
});

export const logsHeadersSchema = z.object({
  "last-event-id": z
    .string()
    .optional()
    .describe("With follow=true: resume after this event id (wins over `since`)"),
});

export const terminalQuerySchema = z.object({
  ticket: z
    .string()
    .optional()
    .describe("A ticket from POST …/terminal/ticket, for clients that cannot send headers"),
});

export const processInfoSchema = z.object({
  id: z.string(),
  command: z.string(),
  args: z.array(z.string()),
  cwd: z.string(),
  tty: z.boolean(),
  cols: z.number().int().nullable(),
  rows: z.number().int().nullable(),
  source: z.enum(["api", "acp"]).describe("acp: started by an agent's terminal/create"),
  status: z.enum(["running", "exited"]),
  pid: z.number().int(),
  exitCode: z.number().int().nullable(),
  signal: z.string().nullable(),
  stdinOpen: z.boolean(),
  createdAt: z.string(),
  exitedAt: z.string().nullable(),
  stdoutBytes: z.number().int(),
  stderrBytes: z.number().int(),
});

export const runResultSchema = z.object({
  exitCode: z.number().int().nullable(),
  signal: z.string().nullable(),
  stdout: z.string(),
  stderr: z.string(),
  encoding: z.enum(["utf8", "base64"]),
  truncated: z.boolean().describe("Output past maxOutputBytes was dropped"),
  timedOut: z.boolean().describe("Killed (SIGKILL) after timeoutMs"),
  durationMs: z.number().int(),
});

export const logEntrySchema = z.object({
  seq: z.number().int().describe("Position in the process' output, both streams counted"),
  stream: z.enum(["stdout", "stderr"]),
  offset: z.number().int().describe("Byte offset of this chunk within its stream"),
  data: z.string(),
});

export const logsResultSchema = z.object({
  entries: z.array(logEntrySchema),
  encoding: z.enum(["utf8", "base64"]),
  lastSeq: z.number().int().describe("Pass as `since` to get only what comes next"),
  droppedBytes: z.number().int().describe("Oldest output dropped past the log limit"),
  status: z.enum(["running", "exited"]),
  exitCode: z.number().int().nullable(),
  signal: z.string().nullable(),
});

export const ticketSchema = z.object({
  ticket: z.string(),
  expiresAt: z.string().describe("ISO 8601; the ticket is good for one upgrade until then"),
});

export type RunBody = z.output<ReturnType<typeof runBodySchema>>;
