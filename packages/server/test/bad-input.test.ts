import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startServer, tempDir, type RunningServer } from "@sandbox-agent/testkit";
import { problemDefect, rawExchange } from "./support/raw-http.js";
import { RawConnection } from "./support/rpc.js";

interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  jsonrpcError?: { code: number };
}

/** `depth` nested arrays, spread over lines so that the server has to re-serialize the body. */
function nested(depth: number): string {
  return "[\n".repeat(depth) + "]\n".repeat(depth);
}

async function problemOf(response: Response, status: number): Promise<Problem> {
  const body = await response.text();
  assert.equal(response.status, status, body);
  assert.equal(response.headers.get("content-type"), "application/problem+json");
  const problem = JSON.parse(body) as Problem;
  assert.equal(problem.status, status);
  for (const field of ["type", "title", "detail"] as const) assert.equal(typeof problem[field], "string");
  return problem;
}

describe("bad input gets a 4xx problem, never a 500", () => {
  let server: RunningServer;
  let conn: RawConnection;

  before(async () => {
    server = await startServer({ args: ["--fs-root", tempDir("bad-input-root-")] });
    conn = await RawConnection.open(server);
  });
  after(() => server.stop());

  const initialize = (id: string) =>
    fetch(`${server.baseUrl}/v2/rpc`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: `{"jsonrpc":"2.0","id":${id},"method":"initialize","params":{"protocolVersion":1,"_meta":{"sandboxagent.dev":{"agent":"mock"}}}}`,
      signal: AbortSignal.timeout(10_000),
    });

  it("refuses ids agents cannot echo: non-finite, unsafe, fractional, exponent, non-scalar, huge", async () => {
    const bad = ["1e400", "-1e400", "9007199254740993", "1.5", "1.0", "1e3", "true", '{"a":1}', "[1]"];
    bad.push(JSON.stringify("x".repeat(1025)));
    for (const id of bad) {
      // On an initialize, the agent would be spawned and the answer never matched (a 60 s wait).
      const problem = await problemOf(await initialize(id), 400);
      assert.equal(problem.jsonrpcError?.code, -32600, id);
      const onConnection = await conn.post(`{"jsonrpc":"2.0","id":${id},"method":"session/new","params":{}}`);
      assert.equal((await problemOf(onConnection, 400)).jsonrpcError?.code, -32600, id);
    }
    for (const id of [
      "9007199254740991",
      "-9007199254740991",
      "0",
      '"s"',
      JSON.stringify("x".repeat(1024)),
    ]) {
      const response = await conn.post(`{"jsonrpc":"2.0","id":${id},"method":"_vendor/ok","params":{}}`);
      assert.equal(response.status, 202, id);
    }
  });

  it("refuses JSON nested deeper than 128 levels, in params or in the id, without a 500", async () => {
    for (const depth of [129, 5000, 100_000]) {
      const inParams = await conn.post(`{"jsonrpc":"2.0","method":"_vendor/deep","params":${nested(depth)}}`);
      assert.match((await problemOf(inParams, 400)).detail, /nested/);
      const inId = await conn.post(`{"jsonrpc":"2.0",\n"id":${nested(depth)},"method":"_vendor/deep"}`);
      assert.equal((await problemOf(inId, 400)).jsonrpcError?.code, -32600);
      const initializeDeep = await initialize(nested(depth));
      assert.equal((await problemOf(initializeDeep, 400)).jsonrpcError?.code, -32600);
      const controlPlane = await fetch(`${server.baseUrl}/v2/fs/write`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: `{"path":"/x","content":"x","extra":${nested(depth)}}`,
      });
      await problemOf(controlPlane, 400);
    }
    const shallow = await conn.post(
      `{"jsonrpc":"2.0","method":"_vendor/deep","params":{"a":${nested(120)}}}`,
    );
    assert.equal(shallow.status, 202);
  });

  it("malformed percent-escapes in path parameters are a 400", async () => {
    for (const segment of ["%ZZ", "%", "%E0%A4%A", "%C0%80"]) {
      const problem = await problemOf(await fetch(`${server.baseUrl}/v2/agents/${segment}`), 400);
      assert.match(problem.detail, /percent-encoding/);
    }
  });

  it("requests node:http (or the URL parser) cannot take get problem+json, not a bare status line", async () => {
    const cases: Array<[string, number]> = [
      ["GARBAGE\r\n\r\n", 400],
      ["GET /v2/health HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n", 400],
      ["GET /v2/health HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n", 400],
      // node:http accepts this target, the URL parser does not.
      ["GET http://[::1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400],
      ["GET /v2/health HTTP/1.1\r\n\r\n", 400],
      [
        "POST /v2/rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n",
        400,
      ],
      ["POST /v2/rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400],
      [`GET /v2/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`, 431],
    ];
    for (const [request, status] of cases) {
      const [response, ...more] = await rawExchange(server.port, request, { timeoutMs: 10_000 });
      assert.equal(more.length, 0);
      assert.equal(response?.status, status, request.slice(0, 60));
      const contentType = response.headers.get("content-type");
      assert.equal(problemDefect(status, contentType, response.body, response.complete), undefined);
    }
    assert.equal((await fetch(`${server.baseUrl}/v2/health`)).status, 200);
  });
});
