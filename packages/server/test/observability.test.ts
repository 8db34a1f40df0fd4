import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startServer, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { openSession, RawConnection } from "./support/rpc.js";

const TOKEN = "observability-secret-token";

interface LogEntry {
  time: string;
  level: string;
  msg: string;
  [field: string]: unknown;
}

function entries(server: RunningServer): LogEntry[] {
  return server
    .logs()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as LogEntry);
}

describe("logs and metrics", () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer({ token: TOKEN, args: ["--log-level", "debug", "--log-format", "json"] });
  });
  after(() => server.stop());

  it("--log-format json: one object per line; connection opened and closed, agent exit, access lines", async () => {
    const { conn, sse, sessionId } = await openSession(server);
    await conn.prompt(sse, sessionId, "hello");
    sse.close();
    assert.equal((await conn.delete()).status, 202);

    await waitFor(() => entries(server).some((e) => e.msg === "agent exited"), 10_000, "agent exited logged");
    const lines = server.logs().trim().split("\n");
    for (const line of lines) assert.doesNotThrow(() => JSON.parse(line), `not JSON: ${line}`);
    const logged = entries(server);
    const opened = logged.find((e) => e.msg === "connection opened")!;
    assert.equal(opened.agent, "mock");
    assert.equal(typeof opened.pid, "number");
    assert.equal(opened.connection, conn.id.slice(0, 8), "only a prefix of the connection id");
    const closed = logged.find((e) => e.msg === "connection closed")!;
    assert.equal(closed.reason, "deleted");
    assert.equal(typeof closed.durationMs, "number");
    const exited = logged.find((e) => e.msg === "agent exited")!;
    assert.ok("code" in exited && "signal" in exited);

    const access = logged.filter((e) => e.msg === "request");
    const deleted = access.find((e) => e.method === "DELETE")!;
    assert.deepEqual(
      { path: deleted.path, status: deleted.status },
      { path: "/v2/rpc", status: 202 },
      "an access line per request",
    );
    assert.equal(typeof deleted.durationMs, "number");
    assert.equal(typeof access.find((e) => e.method === "POST")!.bytes, "number");
    assert.ok(!server.logs().includes(TOKEN), "the token never reaches the log");
    assert.ok(!server.logs().includes(conn.id), "the whole connection id never reaches the log");
  });

  it("GET /v2/metrics: the Prometheus text format, behind the token", async () => {
    assert.equal((await fetch(`${server.baseUrl}/v2/metrics`)).status, 401);
    const conn = await RawConnection.open(server);
    const response = await fetch(`${server.baseUrl}/v2/metrics`, { headers: server.headers() });
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type")!, /^text\/plain; version=0\.0\.4/);
    const text = await response.text();
    const value = (series: string) => {
      const line = text.split("\n").find((l) => l.startsWith(`${series} `));
      assert.ok(line, `${series} in\n${text}`);
      return Number(line.slice(series.length + 1));
    };
    assert.ok(value("sandbox_agent_connections_open") >= 1);
    assert.ok(value("sandbox_agent_agents_running") >= 1);
    assert.ok(value('sandbox_agent_connections_opened_total{agent="mock"}') >= 1);
    assert.ok(value("sandbox_agent_events_total") > 0);
    assert.ok(value('sandbox_agent_http_requests_total{method="DELETE",route="/v2/rpc",status="202"}') >= 1);
    const count = value('sandbox_agent_http_request_duration_seconds_count{method="POST",route="/v2/rpc"}');
    assert.equal(
      value('sandbox_agent_http_request_duration_seconds_bucket{method="POST",route="/v2/rpc",le="+Inf"}'),
      count,
    );
    assert.ok(value('sandbox_agent_http_response_bytes_total{method="POST",route="/v2/rpc"}') > 0);
    assert.ok(value("process_resident_memory_bytes") > 0);
    // Every sample line is `name{labels} number`; every family has HELP and TYPE.
    for (const line of text.trim().split("\n")) {
      if (line.startsWith("#")) assert.match(line, /^# (HELP|TYPE) [a-z_]+ .+/);
      else assert.match(line, /^[a-z_]+(\{[^}]*\})? -?[0-9.e+-]+$/, line);
    }
    await conn.delete();
  });
});
