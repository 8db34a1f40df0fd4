import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startServer, type RunningServer } from "@sandbox-agent/testkit";
import { RawConnection } from "./support/rpc.js";

describe("security", () => {
  let server: RunningServer;
  const token = "s3cret-token-for-tests";

  before(async () => {
    server = await startServer({ token, args: ["--allow-origin", "http://app.example"] });
  });
  after(() => server.stop());

  it("binds 127.0.0.1 by default", () => {
    assert.equal(new URL(server.baseUrl).hostname, "127.0.0.1");
  });

  it("missing or wrong bearer token is 401 on POST, GET and DELETE", async () => {
    const conn = await RawConnection.open(server);
    for (const authorization of [undefined, "Bearer wrong", "Basic abc", `Bearer ${token}x`]) {
      const headers: Record<string, string> = { "acp-connection-id": conn.id };
      if (authorization) headers.authorization = authorization;
      const requests = [
        fetch(`${server.baseUrl}/v2/rpc`, {
          method: "POST",
          headers: { ...headers, "content-type": "application/json" },
          body: '{"jsonrpc":"2.0","method":"_x"}',
        }),
        fetch(`${server.baseUrl}/v2/rpc`, { headers: { ...headers, accept: "text/event-stream" } }),
        fetch(`${server.baseUrl}/v2/rpc`, { method: "DELETE", headers }),
        fetch(`${server.baseUrl}/v2/health`, { headers }),
      ];
      for (const response of await Promise.all(requests)) {
        assert.equal(response.status, 401);
        assert.equal(response.headers.get("content-type"), "application/problem+json");
        assert.match(response.headers.get("www-authenticate") ?? "", /Bearer/);
      }
    }
    assert.equal((await conn.post({ jsonrpc: "2.0", method: "_x" })).status, 202);
  });

  it("the bearer scheme is case-insensitive (RFC 9110 §11.1)", async () => {
    for (const authorization of [`bearer ${token}`, `BEARER ${token}`, `Bearer   ${token}`]) {
      const response = await fetch(`${server.baseUrl}/v2/health`, { headers: { authorization } });
      assert.equal(response.status, 200, authorization);
    }
    for (const authorization of [`Bearer${token}`, `bearer ${token.toUpperCase()}`, `Basic ${token}`]) {
      const response = await fetch(`${server.baseUrl}/v2/health`, { headers: { authorization } });
      assert.equal(response.status, 401, authorization);
    }
  });

  it("a foreign Origin is 403 on every endpoint", async () => {
    for (const path of ["/v2/rpc", "/v2/health"]) {
      const response = await fetch(`${server.baseUrl}${path}`, {
        headers: server.headers({ origin: "http://evil.example" }),
      });
      assert.equal(response.status, 403, path);
      assert.equal(response.headers.get("content-type"), "application/problem+json");
    }
  });

  it("rejects a Host header that is not loopback (DNS rebinding)", async () => {
    const { request } = await import("node:http");
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        `${server.baseUrl}/v2/health`,
        { headers: { host: "attacker.example:2468", ...server.headers() } },
        (res) => {
          res.resume();
          resolve(res.statusCode!);
        },
      );
      req.on("error", reject);
      req.end();
    });
    assert.equal(status, 403);
  });

  it("CORS preflight and responses for an allowed origin expose the connection header", async () => {
    const preflight = await fetch(`${server.baseUrl}/v2/rpc`, {
      method: "OPTIONS",
      headers: {
        origin: "http://app.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type, authorization, acp-connection-id",
      },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get("access-control-allow-origin"), "http://app.example");
    assert.match(preflight.headers.get("access-control-allow-headers")!, /acp-connection-id/);
    const response = await fetch(`${server.baseUrl}/v2/rpc`, {
      method: "POST",
      headers: server.headers({ origin: "http://app.example", "content-type": "application/json" }),
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: 1, _meta: { "sandboxagent.dev": { agent: "mock" } } },
      }),
    });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("access-control-allow-origin"), "http://app.example");
    assert.notEqual(response.headers.get("access-control-allow-origin"), "*");
    assert.match(response.headers.get("access-control-expose-headers")!, /acp-connection-id/i);
    assert.equal(response.headers.get("vary"), "Origin");
  });
});
