import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startServer, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import type { ConnectionSnapshot } from "../src/runtime/connection-snapshot.js";
import { agentText, openSession } from "./support/rpc.js";

describe("GET /v2/connections", () => {
  const token = "connections-test-token";
  let server: RunningServer;

  before(async () => {
    server = await startServer({ token });
  });
  after(() => server.stop());

  const get = (path: string, headers: Record<string, string> = server.headers()) =>
    fetch(`${server.baseUrl}${path}`, { headers });

  async function list(): Promise<ConnectionSnapshot[]> {
    const response = await get("/v2/connections");
    assert.equal(response.status, 200);
    return ((await response.json()) as { connections: ConnectionSnapshot[] }).connections;
  }

  it("lists another client's connection with its agent, pid, events and session metadata", async () => {
    const started = Date.now();
    const { conn, sse, sessionId } = await openSession(server);
    const titled = await conn.call(sse, "_sandboxagent/session/set_metadata", {
      sessionId,
      metadata: { title: "watched by the list", ticket: 42 },
    });
    assert.equal(titled.error, undefined, JSON.stringify(titled.error));
    await conn.prompt(sse, sessionId, "hello there");
    assert.ok(agentText(sse.messages(), sessionId).length > 0);

    const listed = (await list()).find((c) => c.id === conn.id);
    assert.ok(listed, "the connection is listed");
    assert.equal(listed.agentId, "mock");
    assert.equal(listed.state, "open");
    assert.equal(typeof listed.pid, "number");
    assert.equal(listed.attached, true);
    assert.ok(Date.parse(listed.createdAt) >= started - 1000 && Date.parse(listed.createdAt) <= Date.now());
    assert.ok(Date.parse(listed.lastActivityAt) >= Date.parse(listed.createdAt));
    // Every message the stream carried so far, and the id of the last one the reader got.
    assert.equal(listed.eventCount, sse.messages().length);
    assert.equal(listed.lastEventId, sse.lastId());

    assert.equal(listed.sessions.length, 1);
    const session = listed.sessions[0]!;
    assert.equal(session.sessionId, sessionId);
    assert.equal(session.title, "watched by the list");
    assert.deepEqual(session.metadata, { title: "watched by the list", ticket: 42 });
    assert.equal(session.cwd, process.cwd());
    assert.equal(session.ended, false);
    // The agent's updates; set_metadata's own session_info_update comes from the server.
    const updates = sse
      .messages()
      .filter((m) => m.method === "session/update")
      .filter((m) => (m.params?.update as { _meta?: unknown })._meta === undefined).length;
    assert.ok(updates > 0);
    assert.equal(session.eventCount, updates);
    assert.ok(session.createdAt !== null && session.updatedAt !== null);
    assert.ok(Date.parse(session.updatedAt) >= Date.parse(session.createdAt));

    // The same facts one at a time.
    const one = await get(`/v2/connections/${conn.id}`);
    assert.equal(one.status, 200);
    assert.deepEqual(((await one.json()) as ConnectionSnapshot).sessions, listed.sessions);

    // Without a reader the list says so; after DELETE the connection is gone.
    sse.close();
    await sse.done;
    await waitFor(
      async () => (await list()).find((c) => c.id === conn.id)?.attached === false,
      10_000,
      "detached",
    );
    assert.equal((await conn.delete()).status, 202);
    await waitFor(async () => !(await list()).some((c) => c.id === conn.id), 10_000, "closed");
    const gone = await get(`/v2/connections/${conn.id}`);
    assert.equal(gone.status, 404);
    assert.equal(gone.headers.get("content-type"), "application/problem+json");
    assert.match(((await gone.json()) as { detail: string }).detail, /GET \/v2\/connections/);
  });

  it("is behind the token and the Origin rules", async () => {
    for (const path of ["/v2/connections", "/v2/connections/anything"]) {
      const none = await get(path, {});
      assert.equal(none.status, 401, path);
      assert.equal(none.headers.get("content-type"), "application/problem+json");
      assert.equal((await get(path, { authorization: "Bearer wrong" })).status, 401, path);
      const foreign = await get(path, server.headers({ origin: "http://evil.example" }));
      assert.equal(foreign.status, 403, path);
    }
  });

  it("is in the OpenAPI document", async () => {
    const doc = (await (await get("/v2/openapi.json")).json()) as {
      paths: Record<string, Record<string, { operationId: string; responses: Record<string, unknown> }>>;
    };
    assert.equal(doc.paths["/v2/connections"]?.get?.operationId, "getConnections");
    assert.equal(doc.paths["/v2/connections/{id}"]?.get?.operationId, "getConnectionsId");
    assert.ok(doc.paths["/v2/connections/{id}"]?.get?.responses["404"]);
  });
});
