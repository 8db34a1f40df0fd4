import { RequestError } from "@agentclientprotocol/sdk";

/** RFC 9457 problem details, as our server (and most HTTP stacks) send them. */
export interface ProblemDetails {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  [key: string]: unknown;
}

/** A non-2xx HTTP answer from the ACP endpoint. */
export class AcpHttpError extends Error {
  override readonly name = "AcpHttpError";
  readonly status: number;
  readonly problem: ProblemDetails | undefined;
  /** Raw response body (truncated), when it was not problem+json. */
  readonly body: string;

  constructor(message: string, status: number, body: string, problem?: ProblemDetails) {
    super(
      `${message}: HTTP ${status}${problem?.detail ? ` (${problem.detail})` : problem?.title ? ` (${problem.title})` : ""}`,
    );
    this.status = status;
    this.body = body;
    this.problem = problem;
  }

  /** True when the connection id is gone or unusable: start over with `initialize`. */
  get connectionLost(): boolean {
    return this.status === 404 || this.status === 410;
  }
}

/**
 * The transport cannot continue: the server forgot the connection (404/410),
 * rejected the credentials, the SSE stream could not be re-established, or the
 * negotiated protocol version is unsupported. A higher layer may re-initialize.
 */
export class AcpConnectionLostError extends Error {
  override readonly name = "AcpConnectionLostError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(`connection lost: ${message}`, options);
  }
}

const CODE_LABELS: Readonly<Record<number, string>> = {
  [-32700]: "parse_error",
  [-32600]: "invalid_request",
  [-32601]: "method_not_found",
  [-32602]: "invalid_params",
  [-32603]: "internal_error",
  [-32800]: "request_cancelled",
  [-32000]: "auth_required",
  [-32002]: "resource_not_found",
};

/** Human-readable label for a JSON-RPC error code (`server_error` / `error` otherwise). */
export function rpcErrorLabel(code: number): string {
  return CODE_LABELS[code] ?? (code <= -32000 && code >= -32099 ? "server_error" : "error");
}

/** A JSON-RPC error response to one of our requests. */
export class AcpRpcError extends RequestError {
  override readonly name = "AcpRpcError";
  readonly label: string;
  readonly method: string;

  constructor(method: string, code: number, message: string, data?: unknown) {
    super(code, message, data);
    this.method = method;
    this.label = rpcErrorLabel(code);
  }

  static from(method: string, error: unknown): unknown {
    if (error instanceof AcpRpcError || !(error instanceof RequestError)) return error;
    return new AcpRpcError(method, error.code, error.message, error.data);
  }
}

const MAX_ERROR_BODY_CHARS = 8 * 1024;

/** Builds an `AcpHttpError` from a failed response, parsing `application/problem+json`. */
export async function httpErrorFrom(message: string, response: Response): Promise<AcpHttpError> {
  const text = (await response.text().catch(() => "")).slice(0, MAX_ERROR_BODY_CHARS);
  return new AcpHttpError(
    message,
    response.status,
    text,
    parseProblem(text, response.headers.get("content-type")),
  );
}

/** Parses an `application/problem+json` (or any JSON object) body; undefined for anything else. */
export function parseProblem(text: string, contentType: string | null): ProblemDetails | undefined {
  if (!contentType || !/json/i.test(contentType)) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === "object" && !Array.isArray(value)
      ? (value as ProblemDetails)
      : undefined;
  } catch {
    return undefined;
  }
}
