import type { ServerResponse } from "node:http";

/** RFC 9457 problem details; every HTTP error the server returns has this shape. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  [extension: string]: unknown;
}

const TYPE_BASE = "https://sandboxagent.dev/problems/";

/** Thrown by handlers; the router turns it into an `application/problem+json` response. */
export class ProblemError extends Error {
  readonly problem: Problem;
  readonly headers: Record<string, string>;

  constructor(
    status: number,
    slug: string,
    title: string,
    detail: string,
    extensions: Record<string, unknown> = {},
    headers: Record<string, string> = {},
  ) {
    super(detail);
    this.problem = { type: TYPE_BASE + slug, title, status, detail, ...extensions };
    this.headers = headers;
  }
}

export function sendProblem(res: ServerResponse, error: ProblemError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(error.problem);
  res.writeHead(error.problem.status, {
    ...error.headers,
    "content-type": "application/problem+json",
    "content-length": Buffer.byteLength(body),
  });
  res.end(body);
}

export const problems = {
  badRequest: (detail: string, ext?: Record<string, unknown>) =>
    new ProblemError(400, "bad-request", "Bad Request", detail, ext),
  notFound: (detail: string) => new ProblemError(404, "not-found", "Not Found", detail),
  methodNotAllowed: (allow: string) =>
    new ProblemError(405, "method-not-allowed", "Method Not Allowed", `Use one of: ${allow}.`, {}, { allow }),
  notAcceptable: (detail: string) => new ProblemError(406, "not-acceptable", "Not Acceptable", detail),
  conflict: (detail: string) => new ProblemError(409, "conflict", "Conflict", detail),
  gone: (detail: string, ext?: Record<string, unknown>) => new ProblemError(410, "gone", "Gone", detail, ext),
  tooLarge: (limit: number) =>
    new ProblemError(
      413,
      "payload-too-large",
      "Payload Too Large",
      `The request body exceeds ${limit} bytes.`,
      {
        limit,
      },
    ),
  unsupportedMediaType: (detail: string) =>
    new ProblemError(415, "unsupported-media-type", "Unsupported Media Type", detail),
  unauthorized: () =>
    new ProblemError(
      401,
      "unauthorized",
      "Unauthorized",
      "Send the server token as `Authorization: Bearer <token>`.",
      {},
      { "www-authenticate": 'Bearer realm="sandbox-agent"' },
    ),
  forbidden: (detail: string) => new ProblemError(403, "forbidden", "Forbidden", detail),
  internal: (detail: string) => new ProblemError(500, "internal", "Internal Server Error", detail),
};
