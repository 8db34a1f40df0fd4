import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, describe, it } from "node:test";
import { startServer, type RunningServer } from "@sandbox-agent/testkit";
import { RawConnection } from "./support/rpc.js";

/**
 * A plain `POST /v2/rpc` is answered past the router (server.ts, `postRpcDirect`); any other target
 * of the same route (`/v2/rpc?…`) takes the router to the same handler. Both must give the same
 * answer to every request: the security checks, each problem, the 202, the CORS headers, and the
 * route the access log and the metrics name.
 */
describe("POST /v2/rpc past the router answers as through it", () => {
  let server: RunningServer;
  let conn: RawConnection;
  const token = "direct-path-token";
  const origin = "http://app.example";
  const LIMIT = 4096;

  before(async () => {
    server = await startServer({
      token,
      args: ["--allow-origin", origin],
      config: { limits: { maxBodyBytes: LIMIT } },
    });
    conn = await RawConnection.open(server);
  });
  after(() => server.stop());

  interface Answer {
    status: number;
    headers: Record<string, string | undefined>;
    body: unknown;
  }

  /** The headers an answer is compared by (the rest, such as Date, differs by nature). */
  const COMPARED = [
    "content-type",
    "www-authenticate",
    "access-control-allow-origin",
    "access-control-expose-headers",
    "vary",
    "acp-connection-id",
  ];

  /** One POST on a socket of its own (node:http: the Host header can be set). */
  function post(target: string, headers: Record<string, string>, body: string): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = request(`${server.baseUrl}${target}`, { method: "POST", headers }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => {
          const picked: Record<string, string | undefined> = {};
          for (const name of COMPARED) picked[name] = res.headers[name] as string | undefined;
          resolve({ status: res.statusCode!, headers: picked, body: text === "" ? "" : JSON.parse(text) });
        });
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  let nextId = 1000;
  /** A request of the connection, with an id of its own each time. */
  const message = (method = "x/ping"): string => JSON.stringify({ jsonrpc: "2.0", id: nextId++, method });
  /** A request over the server's body limit. */
  const big = (): string =>
    JSON.stringify({ jsonrpc: "2.0", id: nextId++, method: "x/big", params: { pad: "x".repeat(LIMIT) } });
  const auth = { authorization: `Bearer ${token}` };
  const json = { ...auth, "content-type": "application/json" };
  const known = (): Record<string, string> => ({ ...json, "acp-connection-id": conn.id });

  /**
   * Each case: a name, the status both paths must answer, what changes in the headers of a request
   * of the connection (`undefined`: left out) and its body (default: a request of its own).
   */
  const cases: Array<[string, number, Record<string, string | undefined>?, (() => string)?]> = [
    ["a request of the connection", 202],
    ["a notification", 202, {}, () => '{"jsonrpc":"2.0","method":"x/note","params":{}}'],
    ["an allowed Origin (CORS headers)", 202, { origin }],
    ["no token", 401, { authorization: undefined }],
    ["a wrong token", 401, { authorization: "Bearer no" }],
    ["a foreign Host", 403, { host: "evil.example" }],
    ["a foreign Origin", 403, { origin: "http://evil.example" }],
    ["not JSON by its type", 415, { "content-type": "text/plain" }],
    ["not JSON", 400, {}, () => "{nope"],
    ["not JSON-RPC 2.0", 400, {}, () => message().replace("2.0", "1.0")],
    ["no connection", 400, { "acp-connection-id": undefined }],
    ["an unknown connection", 404, { "acp-connection-id": "no-such-connection" }],
    ["two connection headers that differ", 400, { "x-acp-connection-id": "another" }],
    [
      "initialize on an existing connection",
      400,
      {},
      () => JSON.stringify({ jsonrpc: "2.0", id: nextId++, method: "initialize", params: {} }),
    ],
    [
      "a session header that differs from params.sessionId",
      400,
      { "acp-session-id": "s-header" },
      () =>
        JSON.stringify({ jsonrpc: "2.0", id: nextId++, method: "x/ping", params: { sessionId: "s-params" } }),
    ],
    ["another protocol version", 400, { "acp-protocol-version": "999" }],
    ["a body declared over the limit", 413, {}, big],
    ["a chunked body over the limit", 413, { "transfer-encoding": "chunked" }, big],
  ];

  /** The headers of a request of the connection, changed by `changes`. */
  function headersWith(changes: Record<string, string | undefined>): Record<string, string> {
    const headers: Record<string, string | undefined> = { ...known(), ...changes };
    for (const name of Object.keys(headers)) if (headers[name] === undefined) delete headers[name];
    return headers as Record<string, string>;
  }

  for (const [name, status, changes = {}, body = message] of cases)
    it(`${name}: ${status} either way`, async () => {
      const direct = await post("/v2/rpc", headersWith(changes), body());
      const routed = await post("/v2/rpc?via=router", headersWith(changes), body());
      assert.equal(direct.status, status, JSON.stringify(direct.body));
      assert.deepEqual(direct, routed);
    });

  it("a body cut short is answered by neither, and the server goes on", async () => {
    for (const target of ["/v2/rpc", "/v2/rpc?via=router"]) {
      await new Promise<void>((resolve) => {
        const req = request(`${server.baseUrl}${target}`, {
          method: "POST",
          headers: { ...known(), "content-length": "1000" },
        });
        req.on("error", () => resolve());
        req.write(message().slice(0, 10), () => setImmediate(() => req.destroy()));
        req.on("close", () => resolve());
      });
    }
    const answer = await post("/v2/rpc", known(), message());
    assert.equal(answer.status, 202);
  });

  it("a body sent in pieces is read whole, either way", async () => {
    for (const target of ["/v2/rpc", "/v2/rpc?via=router"]) {
      const status = await new Promise<number>((resolve, reject) => {
        const req = request(`${server.baseUrl}${target}`, {
          method: "POST",
          headers: { ...known(), "transfer-encoding": "chunked" },
        });
        req.on("response", (res) => resolve(res.resume().statusCode!)).on("error", reject);
        const body = message();
        const third = Math.ceil(body.length / 3);
        // Each piece written once the one before has gone out: the server reads three chunks.
        req.write(body.slice(0, third), () =>
          req.write(body.slice(third, 2 * third), () => req.end(body.slice(2 * third))),
        );
      });
      assert.equal(status, 202, target);
    }
  });

  it("the metrics name the route of both", async () => {
    const before = await requestsOf(202);
    await post("/v2/rpc", known(), message());
    await post("/v2/rpc?via=router", known(), message());
    assert.equal(await requestsOf(202), before + 2);
  });

  /** `sandbox_agent_http_requests_total` of POST /v2/rpc with `status`. */
  async function requestsOf(status: number): Promise<number> {
    const text = await (await fetch(`${server.baseUrl}/v2/metrics`, { headers: auth })).text();
    const line = text
      .split("\n")
      .find((l) =>
        l.startsWith(`sandbox_agent_http_requests_total{method="POST",route="/v2/rpc",status="${status}"}`),
      );
    return line === undefined ? 0 : Number(line.split(" ").at(-1));
  }
});
