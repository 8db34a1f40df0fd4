import { isObject } from "../protocol.js";

/** One problem with a request's params: where (`a.b`, "" for the params themselves) and what. */
export interface ParamsIssue {
  path: string;
  message: string;
}

/**
 * `{ sessionId }`, the params of most `_sandboxagent/*` methods, checked by hand: these methods are
 * called from a connection's first turn on, and zod (with the schemas of the rarer methods, in
 * `param-schemas.ts`) loads only when one of those is called. Other keys are allowed, as zod's
 * `looseObject` allows them.
 */
export function sessionParamsIssues(params: unknown): ParamsIssue[] | { sessionId: string } {
  if (!isObject(params)) return [{ path: "", message: `expected an object, received ${kindOf(params)}` }];
  const { sessionId } = params;
  if (typeof sessionId !== "string")
    return [{ path: "sessionId", message: `expected a string, received ${kindOf(sessionId)}` }];
  if (sessionId.length === 0) return [{ path: "sessionId", message: "must not be empty" }];
  return { sessionId };
}

function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
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

let schemas: Promise<typeof import("./param-schemas.js")> | undefined;

/** The zod schemas (`param-schemas.ts`), loaded on first use. */
export function loadParamSchemas(): Promise<typeof import("./param-schemas.js")> {
  return (schemas ??= import("./param-schemas.js"));
}
