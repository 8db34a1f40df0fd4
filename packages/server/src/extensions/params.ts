import { z } from "zod";
import { META_KEY } from "../protocol.js";

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

/**
 * Bounds of the metadata kept per session: it lives for the server's lifetime (up to 10,000
 * sessions) and is copied into answers (`set_metadata`, every `session/list`), so it must stay
 * small enough to keep and shallow enough to serialize (JSON.stringify overflows the stack near
 * 5,000 levels, where JSON.parse still accepts 100,000).
 */
export const METADATA_LIMITS = { maxDepth: 32, maxBytes: 16 * 1024 } as const;

/** Why `metadata` exceeds `METADATA_LIMITS`, or undefined when it fits. */
export function metadataOverLimit(metadata: Record<string, unknown>): string | undefined {
  // Iterative: a value nested 100,000 levels must not overflow the stack here either.
  const stack: Array<{ value: unknown; depth: number }> = [{ value: metadata, depth: 1 }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    if (typeof item.value !== "object" || item.value === null) continue;
    if (item.depth > METADATA_LIMITS.maxDepth) return `nested deeper than ${METADATA_LIMITS.maxDepth} levels`;
    for (const child of Object.values(item.value)) stack.push({ value: child, depth: item.depth + 1 });
  }
  const bytes = Buffer.byteLength(JSON.stringify(metadata));
  if (bytes > METADATA_LIMITS.maxBytes)
    return `over ${METADATA_LIMITS.maxBytes} bytes once stored (${bytes} bytes as JSON)`;
  return undefined;
}
