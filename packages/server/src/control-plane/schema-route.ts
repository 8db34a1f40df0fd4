import { z } from "zod";
import { isJsonContentType, readBody } from "../http/body.js";
import { MAX_JSON_DEPTH, scanJson } from "../http/json.js";
import { ProblemError, problems } from "../http/problem.js";
import type { HttpContext, HttpMethod, Route } from "../http/router.js";

/** A JSON Schema (2020-12, the dialect of OpenAPI 3.1) as produced by `z.toJSONSchema`. */
export type JsonSchema = { [keyword: string]: unknown };

/** A response body: a zod schema (JSON), raw bytes, a server-sent event stream, or plain text. */
export type BodySchema = z.ZodType | "binary" | "sse" | "text";

export interface ResponseSpec {
  description: string;
  /** Body of the response; error statuses (>= 400) without one are documented as problem+json. */
  schema?: BodySchema;
  /** Extra media types this status may also answer with (e.g. NDJSON next to JSON). */
  alternatives?: Record<string, BodySchema>;
  headers?: Record<string, { description: string; schema: z.ZodType }>;
}

type QuerySchema = z.ZodObject;
type RequestBody = z.ZodType | "binary";

/** What a route declares about itself; it both validates requests and becomes the OpenAPI operation. */
export interface RouteSpec<
  Q extends QuerySchema | undefined = undefined,
  P extends QuerySchema | undefined = undefined,
  B extends RequestBody | undefined = undefined,
> {
  method: HttpMethod;
  /** Path with `{name}` segments, as the router takes it. */
  path: string;
  summary: string;
  description?: string;
  tags: string[];
  query?: Q;
  params?: P;
  /** Request headers (lower-case names); documented and validated. */
  headers?: z.ZodObject;
  /** A JSON body schema, or "binary" for a raw body the handler streams from `ctx.req`. */
  body?: B;
  /** Limit for JSON bodies (default 1 MiB); binary bodies are the handler's business. */
  maxBodyBytes?: number;
  responses: Record<number, ResponseSpec>;
}

type Parsed<T> = T extends z.ZodType ? z.output<T> : undefined;

/** The handler's context: the router's, plus the validated query, path parameters and JSON body. */
export interface SchemaContext<Q, P, B> extends Omit<HttpContext, "params"> {
  query: Parsed<Q>;
  params: Parsed<P>;
  body: Parsed<B>;
}

export interface RouteDefinition<
  Q extends QuerySchema | undefined,
  P extends QuerySchema | undefined,
  B extends RequestBody | undefined,
> extends RouteSpec<Q, P, B> {
  handler(ctx: SchemaContext<Q, P, B>): Promise<void> | void;
}

/** A route's place in the OpenAPI document. */
export interface DocumentedRoute {
  method: HttpMethod;
  path: string;
  operation: OperationObject;
}

/** A route for the router that also documents itself. */
export interface RouteDef extends Route, DocumentedRoute {}

export interface ParameterObject {
  name: string;
  in: "query" | "path" | "header";
  required: boolean;
  description?: string;
  schema: JsonSchema;
}

export interface MediaTypeObject {
  schema: JsonSchema;
}

export interface ResponseObject {
  description: string;
  content?: Record<string, MediaTypeObject>;
  headers?: Record<string, { description: string; schema: JsonSchema }>;
}

export interface OperationObject {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  parameters?: ParameterObject[];
  requestBody?: { required: boolean; content: Record<string, MediaTypeObject> };
  responses: Record<string, ResponseObject>;
}

export interface OpenApiDocument {
  openapi: "3.1.0";
  info: { title: string; version: string; description: string };
  jsonSchemaDialect: string;
  paths: Record<string, Partial<Record<Lowercase<HttpMethod>, OperationObject>>>;
  components: {
    schemas: Record<string, JsonSchema>;
    securitySchemes: Record<string, { type: "http"; scheme: "bearer"; description: string }>;
  };
  security: Record<string, string[]>[];
}

const DEFAULT_MAX_JSON_BODY = 1024 * 1024;
const PROBLEM_REF = "#/components/schemas/Problem";
const PROBLEM_MEDIA_TYPE = "application/problem+json";

/** RFC 9457 problem details, as every error response carries them. */
export const problemSchema = z.looseObject({
  type: z.string().describe("URI identifying the problem type"),
  title: z.string(),
  status: z.number().int(),
  detail: z.string(),
  issues: z
    .array(z.object({ path: z.string(), message: z.string(), code: z.string() }))
    .optional()
    .describe("Validation failures (400 responses for invalid requests)"),
});

/** A `true`/`false` query flag (absent means `fallback`). */
export function booleanQuery(fallback: boolean, description: string) {
  return z
    .enum(["true", "false"])
    .optional()
    .transform((v) => (v === undefined ? fallback : v === "true"))
    .describe(`${description} (default ${fallback})`);
}

/** Declares a route: validates its inputs with the zod schemas and documents it from the same schemas. */
export function defineRoute<
  Q extends QuerySchema | undefined = undefined,
  P extends QuerySchema | undefined = undefined,
  B extends RequestBody | undefined = undefined,
>(definition: RouteDefinition<Q, P, B>): RouteDef {
  const { handler, ...spec } = definition;
  return {
    ...describeRoute(spec),
    handler: async (ctx: HttpContext) => {
      validateOptional(definition.headers, ctx.req.headers, "headers");
      const query = validateOptional(definition.query, Object.fromEntries(ctx.url.searchParams), "query");
      const params = validateOptional(definition.params, ctx.params, "path");
      const body = await readJsonBody(ctx, definition);
      await handler({
        req: ctx.req,
        res: ctx.res,
        url: ctx.url,
        query: query as Parsed<Q>,
        params: params as Parsed<P>,
        body: body as Parsed<B>,
      });
    },
  };
}

/** Documents a route without serving it (for endpoints served elsewhere, such as `/v2/rpc`). */
export function describeRoute<
  Q extends QuerySchema | undefined,
  P extends QuerySchema | undefined,
  B extends RequestBody | undefined,
>(spec: RouteSpec<Q, P, B>): DocumentedRoute {
  const parameters = [
    ...parametersOf(spec.params, "path"),
    ...parametersOf(spec.query, "query"),
    ...parametersOf(spec.headers, "header"),
  ];
  const validates = parameters.length > 0 || spec.body !== undefined;
  const operation: OperationObject = {
    operationId: operationId(spec.method, spec.path),
    summary: spec.summary,
    ...(spec.description ? { description: spec.description } : {}),
    tags: spec.tags,
    ...(parameters.length ? { parameters } : {}),
    ...(spec.body !== undefined ? { requestBody: requestBodyOf(spec.body) } : {}),
    responses: responsesOf(spec.responses, validates),
  };
  return { method: spec.method, path: spec.path, operation };
}

/** Builds the OpenAPI 3.1 document for the given routes. */
export function openApiDocument(
  routes: readonly DocumentedRoute[],
  info: { title: string; version: string; description: string },
): OpenApiDocument {
  const paths: OpenApiDocument["paths"] = {};
  for (const route of routes) {
    const item = (paths[route.path] ??= {});
    item[route.method.toLowerCase() as Lowercase<HttpMethod>] = route.operation;
  }
  return {
    openapi: "3.1.0",
    info,
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    paths,
    components: {
      schemas: { Problem: jsonSchema(problemSchema, "output") },
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description: "The server token (--token); a loopback server may run without one",
        },
      },
    },
    // `{}` first: a token is only required when the server was started with one.
    security: [{}, { bearer: [] }],
  };
}

/** A 400 problem listing every zod issue, so clients can show all mistakes at once. */
export function validationProblem(where: string, error: z.ZodError): ProblemError {
  const issues = error.issues.map((issue) => ({
    path: issue.path.map(String).join("."),
    message: issue.message,
    code: issue.code,
  }));
  const first = issues[0];
  const summary = first ? `${first.path || "(root)"}: ${first.message}` : "invalid";
  return new ProblemError(400, "validation-failed", "Invalid Request", `Invalid ${where}: ${summary}`, {
    issues,
  });
}

function validate<T extends z.ZodType>(schema: T, input: unknown, where: string): z.output<T> {
  const result = schema.safeParse(input);
  if (!result.success) throw validationProblem(where, result.error);
  return result.data;
}

function validateOptional(schema: z.ZodType | undefined, input: unknown, where: string): unknown {
  return schema === undefined ? undefined : validate(schema, input, where);
}

async function readJsonBody(
  ctx: HttpContext,
  spec: RouteSpec<QuerySchema | undefined, QuerySchema | undefined, RequestBody | undefined>,
) {
  if (spec.body === undefined || spec.body === "binary") return undefined;
  const raw = await readBody(ctx.req, spec.maxBodyBytes ?? DEFAULT_MAX_JSON_BODY);
  let json: unknown = undefined;
  if (raw.length > 0) {
    if (!isJsonContentType(ctx.req.headers["content-type"])) {
      throw problems.unsupportedMediaType("Request bodies must be Content-Type: application/json.");
    }
    const text = raw.toString("utf8");
    try {
      json = JSON.parse(text);
    } catch {
      throw problems.badRequest("The body is not valid JSON.");
    }
    const { depth } = scanJson(text);
    if (depth > MAX_JSON_DEPTH)
      throw problems.badRequest(
        `The body is nested ${depth} levels deep; at most ${MAX_JSON_DEPTH} are accepted.`,
      );
  }
  return validate(spec.body, json, "body");
}

function jsonSchema(schema: z.ZodType, io: "input" | "output"): JsonSchema {
  const generated = z.toJSONSchema(schema, {
    target: "draft-2020-12",
    io,
    unrepresentable: "any",
  }) as JsonSchema;
  // The document declares the dialect once (`jsonSchemaDialect`).
  delete generated.$schema;
  return generated;
}

function parametersOf(schema: QuerySchema | undefined, location: ParameterObject["in"]): ParameterObject[] {
  if (schema === undefined) return [];
  const object = jsonSchema(schema, "input");
  const properties = (object.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((object.required ?? []) as string[]);
  return Object.entries(properties).map(([name, property]) => {
    const { description, ...rest } = property;
    return {
      name,
      in: location,
      required: location === "path" || required.has(name),
      ...(typeof description === "string" ? { description } : {}),
      schema: rest,
    };
  });
}

function mediaTypeOf(schema: BodySchema, io: "input" | "output"): [string, MediaTypeObject] {
  if (schema === "binary")
    return [
      "application/octet-stream",
      { schema: { type: "string", contentMediaType: "application/octet-stream" } },
    ];
  if (schema === "sse")
    return ["text/event-stream", { schema: { type: "string", description: "Server-sent events" } }];
  if (schema === "text") return ["text/plain", { schema: { type: "string" } }];
  return ["application/json", { schema: jsonSchema(schema, io) }];
}

function requestBodyOf(body: RequestBody): NonNullable<OperationObject["requestBody"]> {
  const [mediaType, media] = mediaTypeOf(body, "input");
  const required = body === "binary" || !body.safeParse(undefined).success;
  return { required, content: { [mediaType]: media } };
}

function responsesOf(
  responses: Record<number, ResponseSpec>,
  validates: boolean,
): Record<string, ResponseObject> {
  const problem = { [PROBLEM_MEDIA_TYPE]: { schema: { $ref: PROBLEM_REF } } };
  const out: Record<string, ResponseObject> = {};
  for (const [status, spec] of Object.entries(responses)) {
    const content: Record<string, MediaTypeObject> = {};
    if (spec.schema !== undefined)
      content[mediaTypeOf(spec.schema, "output")[0]] = mediaTypeOf(spec.schema, "output")[1];
    for (const [mediaType, schema] of Object.entries(spec.alternatives ?? {})) {
      content[mediaType] = mediaTypeOf(schema, "output")[1];
    }
    const isError = Number(status) >= 400 && spec.schema === undefined;
    out[status] = {
      description: spec.description,
      ...(isError ? { content: problem } : Object.keys(content).length ? { content } : {}),
      ...(spec.headers ? { headers: headersOf(spec.headers) } : {}),
    };
  }
  if (validates && out["400"] === undefined) {
    out["400"] = {
      description: "Invalid request (the problem lists the validation issues).",
      content: problem,
    };
  }
  out.default = { description: "Any other error, as problem details.", content: problem };
  return out;
}

function headersOf(headers: NonNullable<ResponseSpec["headers"]>): ResponseObject["headers"] {
  return Object.fromEntries(
    Object.entries(headers).map(([name, h]) => [
      name,
      { description: h.description, schema: jsonSchema(h.schema, "output") },
    ]),
  );
}

function operationId(method: HttpMethod, path: string): string {
  const words = path
    .split("/")
    .filter((s) => s && s !== "v2")
    .map((s) =>
      s
        .replace(/[{}]/g, "")
        .replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? "").toUpperCase()),
    );
  const name = words.map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join("");
  return method.toLowerCase() + name;
}
