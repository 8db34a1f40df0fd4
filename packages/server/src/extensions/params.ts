import { z } from "zod";
import { META_KEY } from "./protocol.js";

const sessionId = z.string().min(1);
const metadata = z.record(z.string(), z.unknown());

export const sessionParams = z.looseObject({ sessionId });

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

/** `-32602` data: zod's issues, flattened to path + message. */
export function issuesOf(error: z.ZodError): Array<{ path: string; message: string }> {
  return error.issues.map((i) => ({ path: i.path.join("."), message: i.message }));
}
