import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { startServer, tempDir, type RunningServer } from "@sandbox-agent/testkit";
import { AgentRegistry } from "../src/agents/registry.js";
import { healthRoute } from "../src/control-plane/health.js";
import { controlPlaneRoutes } from "../src/control-plane/routes.js";
import type { OpenApiDocument } from "../src/control-plane/schema-route.js";
import { createLogger } from "../src/log.js";
import { ServerMetrics } from "../src/observability/metrics.js";
import { metricsRoute } from "../src/observability/metrics-route.js";
import { ProcessManager } from "../src/processes/manager.js";
import { ConnectionRegistry } from "../src/runtime/connections.js";
import { TicketBook } from "../src/http/tickets.js";
import { DEFAULT_LIMITS } from "../src/runtime/options.js";
import { rpcRoutes } from "../src/transport/rpc-routes.js";
import { memoryStore } from "../src/store/event-store.js";

const METHODS = ["get", "post", "put", "patch", "delete"] as const;

/** "METHOD /path" for every operation in the document. */
function operationsOf(doc: OpenApiDocument): string[] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m] !== undefined).map((m) => `${m.toUpperCase()} ${path}`),
  );
}

/** The route table the server builds (served from start, and loaded on first use), listed without serving it. */
function routeTable(): string[] {
  const logger = createLogger("error");
  const connections = new ConnectionRegistry({
    idleMs: 60_000,
    maxConnections: 1,
    logger,
    store: memoryStore(),
  });
  const processes = new ProcessManager({ workdir: tempDir(), logger });
  const routes = controlPlaneRoutes({
    registry: new AgentRegistry({}, tempDir()),
    connections,
    dataDir: tempDir(),
    workdir: tempDir(),
    fsRoot: tempDir(),
    processes,
    logger,
  });
  return [
    ...[
      ...routes,
      healthRoute({ connections, workdir: tempDir(), fsRoot: tempDir() }),
      metricsRoute({ metrics: new ServerMetrics(), connections, processes }),
    ].map((r) => `${r.method} ${r.path}`),
    ...rpcRoutes(
      {
        connections,
        limits: { ...DEFAULT_LIMITS, maxConnections: 1, maxSockets: 1 },
        logger,
        extensions: async () => [],
        launch: () => Promise.reject(new Error("not called")),
      },
      new TicketBook(1_000),
    ).map((r) => `${r.method} ${r.path}`),
  ];
}

async function problemOf(response: Response): Promise<Record<string, unknown>> {
  assert.equal(response.headers.get("content-type"), "application/problem+json");
  return (await response.json()) as Record<string, unknown>;
}

describe("control plane", () => {
  let server: RunningServer;
  let doc: OpenApiDocument;
  let fsRoot: string;

  before(async () => {
    fsRoot = tempDir("cp-root-");
    server = await startServer({ args: ["--fs-root", fsRoot] });
    const response = await fetch(`${server.baseUrl}/v2/openapi.json`);
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type") ?? "", /^application\/json/);
    doc = (await response.json()) as OpenApiDocument;
  });
  after(() => server.stop());

  it("GET /v2/health reports status, version, uptime, connections, the workdir and the file API root", async () => {
    const response = await fetch(`${server.baseUrl}/v2/health`);
    assert.equal(response.status, 200);
    const body = (await response.json()) as Record<string, unknown>;
    assert.deepEqual(Object.keys(body).sort(), [
      "connections",
      "fsRoot",
      "status",
      "uptimeMs",
      "version",
      "workdir",
    ]);
    assert.equal(body.status, "ok");
    assert.equal(typeof body.version, "string");
    assert.ok(Number.isInteger(body.uptimeMs) && (body.uptimeMs as number) >= 0);
    assert.equal(body.connections, 0);
    // Without --workdir: <data-dir>/workspace, never the server's own working directory.
    assert.equal(body.workdir, path.join(server.dataDir, "workspace"));
    assert.equal(body.fsRoot, fsRoot);
  });

  it("openapi.json is an OpenAPI 3.1 document with the problem schema as a component", () => {
    assert.equal(doc.openapi, "3.1.0");
    assert.equal(typeof doc.info.title, "string");
    assert.equal(typeof doc.info.version, "string");
    assert.equal(doc.jsonSchemaDialect, "https://json-schema.org/draft/2020-12/schema");
    const problem = doc.components.schemas.Problem!;
    assert.deepEqual(problem.required, ["type", "title", "status", "detail"]);
    const ids = new Set<string>();
    for (const item of Object.values(doc.paths)) {
      for (const method of METHODS) {
        const op = item[method];
        if (!op) continue;
        assert.ok(!ids.has(op.operationId), `duplicate operationId ${op.operationId}`);
        ids.add(op.operationId);
        assert.ok(op.summary.length > 0);
        const fallback = op.responses.default?.content?.["application/problem+json"]?.schema;
        assert.deepEqual(fallback, { $ref: "#/components/schemas/Problem" }, op.operationId);
        for (const [status, response] of Object.entries(op.responses)) {
          assert.ok(/^([1-5]\d\d|default)$/.test(status), `${op.operationId} status ${status}`);
          assert.equal(typeof response.description, "string");
        }
        for (const p of op.parameters ?? []) assert.ok(["query", "path", "header"].includes(p.in));
      }
    }
  });

  it("openapi.json lists exactly the routes the server has", () => {
    assert.deepEqual(operationsOf(doc).sort(), routeTable().sort());
  });

  it("every documented operation is served (no router 404/405)", async () => {
    for (const operation of operationsOf(doc)) {
      const [method, path] = operation.split(" ") as [string, string];
      const url = `${server.baseUrl}${path.replace(/\{\w+\}/g, "no-such-thing")}`;
      const response = await fetch(url, { method, signal: AbortSignal.timeout(5000) });
      const text = await response.text();
      assert.notEqual(response.status, 405, operation);
      assert.ok(!text.includes("No endpoint at"), `${operation}: ${text}`);
    }
  });

  it("the document comes from the validating schemas: query, body and their constraints", () => {
    const list = doc.paths["/v2/fs/list"]!.get!;
    const names = (list.parameters ?? []).map((p) => `${p.in}:${p.name}:${p.required}`);
    assert.deepEqual(names.sort(), ["query:limit:false", "query:path:false", "query:recursive:false"]);
    const upload = doc.paths["/v2/fs/file"]!.put!;
    assert.ok(upload.requestBody?.content["application/octet-stream"]);
    const write = doc.paths["/v2/fs/write"]!.post!.requestBody!.content["application/json"]!.schema;
    assert.deepEqual(write.required, ["path", "content"]);
    assert.equal(write.additionalProperties, false);
    const download = doc.paths["/v2/fs/file"]!.get!.responses;
    assert.ok(download["206"]?.content?.["application/octet-stream"]);
    assert.ok(download["404"]?.content?.["application/problem+json"]);
  });

  it("invalid query parameters are a 400 problem listing every issue", async () => {
    const response = await fetch(`${server.baseUrl}/v2/fs/list?recursive=maybe&limit=0`);
    assert.equal(response.status, 400);
    const problem = await problemOf(response);
    assert.equal(problem.type, "https://sandboxagent.dev/problems/validation-failed");
    const issues = problem.issues as { path: string; message: string; code: string }[];
    assert.deepEqual(issues.map((i) => i.path).sort(), ["limit", "recursive"]);
    for (const issue of issues) assert.ok(issue.message.length > 0 && issue.code.length > 0);
  });

  it("invalid JSON bodies are 400 problems with issues; wrong media type is 415", async () => {
    const post = (body: string, type = "application/json") =>
      fetch(`${server.baseUrl}/v2/fs/mkdir`, { method: "POST", headers: { "content-type": type }, body });
    const invalid = await post(JSON.stringify({ path: 7, recursive: "yes", extra: 1 }));
    assert.equal(invalid.status, 400);
    const issues = (await problemOf(invalid)).issues as { path: string; code: string }[];
    assert.deepEqual(issues.map((i) => i.path).sort(), ["", "path", "recursive"]);
    assert.ok(issues.some((i) => i.code === "unrecognized_keys"));

    const malformed = await post("{not json");
    assert.equal(malformed.status, 400);
    assert.match(String((await problemOf(malformed)).detail), /not valid JSON/);

    const empty = await post("");
    assert.equal(empty.status, 400);
    assert.ok(Array.isArray((await problemOf(empty)).issues));

    const text = await post('{"path":"x"}', "text/plain");
    assert.equal(text.status, 415);
    await problemOf(text);
  });

  it("control-plane routes require the token when the server has one", async () => {
    const guarded = await startServer({ token: "cp-token", args: ["--fs-root", tempDir("cp-token-")] });
    try {
      for (const endpoint of ["/v2/health", "/v2/openapi.json", "/v2/fs/list", "/v2/fs/file?path=x"]) {
        const denied = await fetch(guarded.baseUrl + endpoint);
        assert.equal(denied.status, 401, endpoint);
        await problemOf(denied);
      }
      const allowed = await fetch(`${guarded.baseUrl}/v2/fs/list`, { headers: guarded.headers() });
      assert.equal(allowed.status, 200);
    } finally {
      await guarded.stop();
    }
    assert.deepEqual(doc.components.securitySchemes.bearer?.scheme, "bearer");
  });

  it("unknown control-plane paths and methods are problems too", async () => {
    const missing = await fetch(`${server.baseUrl}/v2/fs/nope`);
    assert.equal(missing.status, 404);
    await problemOf(missing);
    const wrongMethod = await fetch(`${server.baseUrl}/v2/health`, { method: "DELETE" });
    assert.equal(wrongMethod.status, 405);
    await problemOf(wrongMethod);
  });
});
