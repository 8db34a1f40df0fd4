import { ProblemError } from "./problem.js";

/** A 503 problem with `Retry-After`: the server is at a limit, out of resources, or going away. */
export function unavailable(
  detail: string,
  ext: Record<string, unknown> = {},
  retryAfterS = 1,
  headers: Record<string, string> = {},
): ProblemError {
  return new ProblemError(503, "unavailable", "Service Unavailable", detail, ext, {
    ...headers,
    "retry-after": String(retryAfterS),
  });
}
