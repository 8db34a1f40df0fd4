import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { startServer, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { mockWith, stdinLog } from "./support/agents.js";
import { agentText, RawConnection } from "./support/rpc.js";

const echoLog = stdinLog();

/** Lines the mock agent received on stdin (it logs each raw line before parsing). */
function received(): Array<Record<string, unknown>> {
  return readFileSync(echoLog, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe("POST semantics", () => {
  let server: RunningServer;
  let conn: RawConnection;

  before(async () => {
    server = await startServer({
      config: { agents: { logged: mockWith("--stdin-log", echoLog) }, limits: { maxBodyBytes: 1024 * 1024 } },
    });
    conn = await RawConnection.open(server, "logged");
  });
  after(() => server.stop());

  it("a request is 202 with an empty body; its response arrives on SSE", async () => {
    const response = await conn.post({
      jsonrpc: "2.0",
      id: 100,
      method: "session/new",
      params: { cwd: "/", mcpServers: [] },
    });
    assert.equal(response.status, 202);
    assert.equal(await response.text(), "");
    const sse = await conn.openSse();
    const answer = await sse.waitFor((m) => m.id === 100);
    assert.ok(answer.result?.sessionId);
    sse.close();
  });

  it("a notification is 202", async () => {
    const response = await conn.notify("session/cancel", { sessionId: "none" });
    assert.equal(response.status, 202);
  });

  it("no connection id is 400, an unknown one 404", async () => {
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "session/new", params: {} });
    const headers = { "content-type": "application/json" };
    const missing = await fetch(`${server.baseUrl}/v2/rpc`, { method: "POST", headers, body });
    assert.equal(missing.status, 400);
    const bogus = await fetch(`${server.baseUrl}/v2/rpc`, {
      method: "POST",
      headers: { ...headers, "acp-connection-id": "bogus" },
      body,
    });
    assert.equal(bogus.status, 404);
    assert.equal(bogus.headers.get("content-type"), "application/problem+json");
  });

  it("text/plain is 415; application/json with charset is accepted", async () => {
    const plain = await conn.post({ jsonrpc: "2.0", method: "x/y" }, { "content-type": "text/plain" });
    assert.equal(plain.status, 415);
    const charset = await conn.post(
      { jsonrpc: "2.0", method: "_x/y" },
      { "content-type": "Application/JSON; charset=utf-8" },
    );
    assert.equal(charset.status, 202);
  });

  it("bad JSON, a scalar and batches are 400 and reach nothing", async () => {
    // A notification the agent receives in order after everything sent before it: once it is in
    // the log, so is every earlier message, and the count below is ours alone.
    const sentinel = async (name: string) => {
      assert.equal((await conn.post({ jsonrpc: "2.0", method: `_x/${name}` })).status, 202);
      await waitFor(() => received().some((m) => m.method === `_x/${name}`), 10_000, name);
      return received().length;
    };
    const before = await sentinel("before-bad-bodies");
    for (const body of [
      "{not json",
      "42",
      '[{"jsonrpc":"2.0","id":9,"method":"session/new","params":{}}]',
      "[]",
      '{"jsonrpc":"2.0"}',
    ]) {
      const response = await conn.post(body);
      assert.equal(response.status, 400, body);
      const problem = (await response.json()) as { status: number; jsonrpcError?: { code: number } };
      assert.equal(problem.status, 400);
      if (body.startsWith("[")) assert.equal(problem.jsonrpcError?.code, -32600);
    }
    assert.equal(await sentinel("after-bad-bodies"), before + 1, "only the sentinel reached the agent");
  });

  it("a body over the limit is 413 and the connection stays usable", async () => {
    const big = JSON.stringify({
      jsonrpc: "2.0",
      method: "_x/big",
      params: { pad: "x".repeat(2 * 1024 * 1024) },
    });
    const response = await conn.post(big);
    assert.equal(response.status, 413);
    const sse = await conn.openSse();
    const session = await conn.newSession(sse);
    assert.ok(session);
    sse.close();
  });

  it("an unknown extension request is forwarded and the agent's -32601 comes back", async () => {
    const sse = await conn.openSse();
    const answer = await conn.call(sse, "_vendor/req", { a: 1 });
    assert.equal(answer.error?.code, -32601);
    sse.close();
  });

  it("_meta and unknown fields reach the agent byte for byte", async () => {
    const raw =
      '{"jsonrpc":"2.0","method":"_vendor/note","params":{"_meta":{"traceparent":"00-abc-01","x.dev/y":1},"nested":{"k":[1,2,{"z":null}]}}}';
    assert.equal((await conn.post(raw)).status, 202);
    await waitFor(
      () => readFileSync(echoLog, "utf8").includes(raw),
      3000,
      "verbatim line in the agent's stdin",
    );
  });

  it("a pretty-printed body is forwarded as one NDJSON line with the same content", async () => {
    const value = { jsonrpc: "2.0", method: "_vendor/pretty", params: { _meta: { a: "b" } } };
    assert.equal((await conn.post(JSON.stringify(value, null, 2))).status, 202);
    await waitFor(() => received().some((m) => m.method === "_vendor/pretty"), 3000, "pretty message");
    assert.deepEqual(
      received().find((m) => m.method === "_vendor/pretty"),
      value,
    );
  });

  it("Acp-Session-Id different from params.sessionId is 400", async () => {
    const response = await conn.post(
      { jsonrpc: "2.0", id: 77, method: "session/prompt", params: { sessionId: "a", prompt: [] } },
      { "acp-session-id": "b" },
    );
    assert.equal(response.status, 400);
  });

  it("PUT and PATCH are 405 with Allow", async () => {
    for (const method of ["PUT", "PATCH"]) {
      const response = await fetch(`${server.baseUrl}/v2/rpc`, { method });
      assert.equal(response.status, 405);
      assert.equal(response.headers.get("allow"), "POST, GET, DELETE");
    }
  });

  it("Acp-Protocol-Version different from the negotiated one is 400", async () => {
    const bad = await conn.post({ jsonrpc: "2.0", method: "_x/v" }, { "acp-protocol-version": "7" });
    assert.equal(bad.status, 400);
    const good = await conn.post({ jsonrpc: "2.0", method: "_x/v" }, { "acp-protocol-version": "1" });
    assert.equal(good.status, 202);
  });

  it("messages acknowledged one after another reach the agent in that order (300×)", async () => {
    for (let i = 0; i < 300; i++) {
      const response = await conn.post({ jsonrpc: "2.0", method: "_order/n", params: { i } });
      assert.equal(response.status, 202);
    }
    await waitFor(
      () => received().filter((m) => m.method === "_order/n").length === 300,
      5000,
      "300 messages",
    );
    const order = received()
      .filter((m) => m.method === "_order/n")
      .map((m) => (m.params as { i: number }).i);
    assert.deepEqual(order, [...Array(300).keys()]);
  });

  it("a duplicate in-flight request id is 400", async () => {
    const sse = await conn.openSse();
    const sessionId = await conn.newSession(sse);
    const prompt = {
      jsonrpc: "2.0",
      id: 555,
      method: "session/prompt",
      params: { sessionId, prompt: [{ type: "text", text: "sleep 500" }] },
    };
    assert.equal((await conn.post(prompt)).status, 202);
    assert.equal((await conn.post(prompt)).status, 400);
    await sse.waitFor((m) => m.id === 555);
    assert.equal(agentText(sse.messages(), sessionId), "");
    sse.close();
  });
});
