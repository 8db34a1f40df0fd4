export type AcpErrorCode =
  | "initialize_timeout"
  | "initialize_failed"
  | "unsupported_protocol_version"
  | "auth_method_unknown"
  | "authenticate_failed"
  | "session_failed"
  | "resume_failed"
  | "agent_exited"
  | "turn_timeout"
  | "thread_busy"
  | "prompt_failed"
  | "config";

/** Every failure the adapter reports carries a stable code (it becomes `RUN_ERROR.code`). */
export class AcpHarnessError extends Error {
  constructor(
    readonly code: AcpErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "AcpHarnessError";
  }
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (err && typeof err === "object" && "message" in err && typeof err.message === "string")
    return err.message;
  return String(err);
}

/** Races `promise` against a timeout; the timer never keeps the process alive. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
    timer.unref();
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
