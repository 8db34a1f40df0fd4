// zod schemas of the params that are checked less often than a turn's messages: `set_metadata`, and
// the client methods an agent calls (fs/*, terminal/*). This module, and zod with it, loads when one
// of them is first called (`loadParamSchemas`), never on a connection's first initialize or turn.
import path from "node:path";
import { z } from "zod";
import { META_KEY } from "../protocol.js";
import type { ParamsIssue } from "./params.js";

const sessionId = z.string().min(1);
const metadata = z.record(z.string(), z.unknown());

/** Keys with runtime behaviour are typed; every other key is stored as given. */
const metadataKeys = z.looseObject({
  title: z.string().nullable().optional(),
  model: z.string().min(1).nullable().optional(),
  mode: z.string().min(1).nullable().optional(),
});

export const setMetadataParams = z
  .looseObject({
    sessionId,
    metadata: metadata.optional(),
    _meta: z.looseObject({ [META_KEY]: metadata.optional() }).optional(),
  })
  .refine((p) => p.metadata !== undefined || p._meta?.[META_KEY] !== undefined, {
    message: `either params.metadata or params._meta["${META_KEY}"] is required`,
  })
  .transform((p, ctx) => {
    // Both forms may be given; `metadata` wins key by key.
    const merged = { ...(p._meta?.[META_KEY] ?? {}), ...(p.metadata ?? {}) };
    const typed = metadataKeys.safeParse(merged);
    if (!typed.success) {
      for (const issue of typed.error.issues) ctx.addIssue({ ...issue, path: ["metadata", ...issue.path] });
      return z.NEVER;
    }
    return { sessionId: p.sessionId, metadata: typed.data };
  });

export type SetMetadataParams = z.output<typeof setMetadataParams>;

const absolutePath = z.string().min(1).refine(path.isAbsolute, "must be an absolute path");
const terminalRef = z.looseObject({ sessionId, terminalId: z.string().min(1) });

/** The client methods the server answers for its agents, by name. */
export const clientRequestParams = {
  "fs/read_text_file": z.looseObject({
    sessionId,
    path: absolutePath,
    line: z.number().int().min(1).nullish(),
    limit: z.number().int().min(0).nullish(),
  }),
  "fs/write_text_file": z.looseObject({ sessionId, path: absolutePath, content: z.string() }),
  "terminal/create": z.looseObject({
    sessionId,
    command: z.string().min(1),
    args: z.array(z.string()).optional(),
    env: z.array(z.object({ name: z.string().min(1), value: z.string() })).optional(),
    cwd: absolutePath.nullish(),
    outputByteLimit: z.number().int().min(0).nullish(),
  }),
  "terminal/output": terminalRef,
  "terminal/wait_for_exit": terminalRef,
  "terminal/kill": terminalRef,
  "terminal/release": terminalRef,
};

/** `-32602` data: zod's issues, flattened to path + message. */
export function issuesOf(error: z.ZodError): ParamsIssue[] {
  return error.issues.map((i) => ({ path: i.path.join("."), message: i.message }));
}
