import { parseProblem, type ProblemDetails } from "acp-http-client";

/** RFC 9457 problem details, as the sandbox-agent server sends them on every HTTP error. */
export type { ProblemDetails };

const MAX_BODY_CHARS = 8 * 1024;

/** A non-2xx answer from the sandbox-agent server, with its problem details when it sent them. */
export class SandboxAgentHttpError extends Error {
  override readonly name = "SandboxAgentHttpError";
  readonly status: number;
  readonly problem: ProblemDetails | undefined;
  /** Raw response body (first 8 KiB). */
  readonly body: string;
  readonly method: string;
  readonly url: string;

  constructor(init: { method: string; url: string; status: number; body: string; problem?: ProblemDetails }) {
    const detail = init.problem?.detail ?? init.problem?.title;
    super(
      `${init.method} ${new URL(init.url).pathname} failed: HTTP ${init.status}${detail ? ` (${detail})` : ""}`,
    );
    this.method = init.method;
    this.url = init.url;
    this.status = init.status;
    this.body = init.body;
    this.problem = init.problem;
  }

  static async from(method: string, url: string, response: Response): Promise<SandboxAgentHttpError> {
    const body = (await response.text().catch(() => "")).slice(0, MAX_BODY_CHARS);
    const problem = parseProblem(body, response.headers.get("content-type"));
    return new SandboxAgentHttpError({ method, url, status: response.status, body, problem });
  }
}

/** A session call was made while the client holds no agent connection. */
export class NotConnectedError extends Error {
  override readonly name = "NotConnectedError";
  constructor(message = "Not connected: call connect() first.", options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** `connect()` was called while a connection is open or being opened. */
export class AlreadyConnectedError extends Error {
  override readonly name = "AlreadyConnectedError";
  constructor() {
    super("Already connected: a client holds at most one connection; call disconnect() first.");
  }
}

/** The agent (or the server on its behalf) answered a session call with an error. */
export class AgentRequestError extends Error {
  override readonly name = "AgentRequestError";
  /** Numeric error code (e.g. -32602 invalid params, -32601 not supported, -32603 internal/agent exited). */
  readonly code: number;
  /** What the client asked for, e.g. `prompt`. */
  readonly operation: string;
  readonly data: unknown;

  constructor(
    operation: string,
    code: number,
    message: string,
    data?: unknown,
    options?: { cause?: unknown },
  ) {
    super(`${operation} failed: ${message} (code ${code})`, options);
    this.operation = operation;
    this.code = code;
    this.data = data;
  }

  /** True when the agent process exited before answering. */
  get agentExited(): boolean {
    return this.dataField("reason") === "agent_exited";
  }

  /**
   * True when the server restarted (crash or restart) before answering: a call in flight then
   * (it may have run), or one the server had not read yet (`safeToRetry`). The connection goes on.
   */
  get serverRestarted(): boolean {
    return this.dataField("reason") === "server_restarted";
  }

  /**
   * True when the call surely did not run, so sending it again is safe: the server restarted
   * before it read it, or could not record it and refused it (`data.reason: "not_recorded"`, its
   * data directory full). False for a call that may have run: repeat it only if that is harmless.
   */
  get safeToRetry(): boolean {
    return this.dataField("reachedAgent") === false;
  }

  private dataField(name: string): unknown {
    const data = this.data;
    return data !== null && typeof data === "object" ? (data as Record<string, unknown>)[name] : undefined;
  }
}
