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

  /** Each case: the headers and body of one POST, and the status both paths must answer. */
  const cases: Array<{
    name: string;
    status: number;
    headers: () => Record<string, string>;
    body: () => string;
  }> = [
    { name: "a request of the connection", status: 202, headers: known, body: () => message() },
    {
      name: "a notification",
      status: 202,
      headers: known,
      body: () => '{"jsonrpc":"2.0","method":"x/note","params":{}}',
    },
    {
      name: "an allowed Origin (CORS headers)",
      status: 202,
      headers: () => ({ ...known(), origin }),
      body: () => message(),
    },
    {
      name: "no token",
      status: 401,
      headers: () => ({ "content-type": "application/json", "acp-connection-id": conn.id }),
      body: () => message(),
    },
    {
      name: "a wrong token",
      status: 401,
      headers: () => ({ ...known(), authorization: "Bearer no" }),
      body: () => message(),
    },
    {
      name: "a foreign Host",
      status: 403,
      headers: () => ({ ...known(), host: "evil.example" }),
      body: () => message(),
    },
    {
      name: "a foreign Origin",
      status: 403,
      headers: () => ({ ...known(), origin: "http://evil.example" }),
      body: () => message(),
    },
    {
      name: "not JSON by its type",
      status: 415,
      headers: () => ({ ...known(), "content-type": "text/plain" }),
      body: () => message(),
    },
    { name: "not JSON", status: 400, headers: known, body: () => "{nope" },
    { name: "not JSON-RPC 2.0", status: 400, headers: known, body: () => message().replace("2.0", "1.0") },
    { name: "no connection", status: 400, headers: () => json, body: () => message() },
    {
      name: "an unknown connection",
      status: 404,
      headers: () => ({ ...json, "acp-connection-id": "no-such-connection" }),
      body: () => message(),
    },
    {
      name: "two connection headers that differ",
      status: 400,
      headers: () => ({ ...known(), "x-acp-connection-id": "another" }),
      body: () => message(),
    },
    {
      name: "initialize on an existing connection",
      status: 400,
      headers: known,
      body: () => JSON.stringify({ jsonrpc: "2.0", id: nextId++, method: "initialize", params: {} }),
    },
    {
      name: "a session header that differs from params.sessionId",
      status: 400,
      headers: () => ({ ...known(), "acp-session-id": "s-header" }),
      body: () =>
        JSON.stringify({ jsonrpc: "2.0", id: nextId++, method: "x/ping", params: { sessionId: "s-params" } }),
    },
    {
      name: "another protocol version",
      status: 400,
      headers: () => ({ ...known(), "acp-protocol-version": "999" }),
      body: () => message(),
    },
    { name: "a body declared over the limit", status: 413, headers: known, body: () => big() },
    {
      name: "a chunked body over the limit",
      status: 413,
      headers: () => ({ ...known(), "transfer-encoding": "chunked" }),
      body: () => big(),
    },
  ];

  for (const { name, status, headers, body } of cases)
    it(`${name}: ${status} either way`, async () => {
      const direct = await post("/v2/rpc", headers(), body());
      const routed = await post("/v2/rpc?via=router", headers(), body());
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
