/** What went wrong, for callers that branch on it; the message says what to do. */
export type DockerSandboxErrorCode =
  | "engine-unreachable"
  | "image-missing"
  | "no-node"
  | "server-failed"
  | "not-found"
  | "exists"
  | "container-gone"
  | "port-not-published";

export class DockerSandboxError extends Error {
  override readonly name = "DockerSandboxError";

  constructor(
    readonly code: DockerSandboxErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The HTTP status of a Docker Engine API error (dockerode sets `statusCode`), if any. */
export function engineStatus(error: unknown): number | undefined {
  const status = (error as { statusCode?: unknown }).statusCode;
  return typeof status === "number" ? status : undefined;
}

/** The engine's own message (`{"message": …}` body) or the error's. */
export function engineMessage(error: unknown): string {
  const json = (error as { json?: { message?: unknown } }).json;
  if (typeof json?.message === "string") return json.message;
  return (error as Error).message ?? String(error);
}
