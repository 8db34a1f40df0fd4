import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { connect as connectH2 } from "node:http2";
import { connect } from "node:net";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { startServer, tempDir, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { metric } from "./support/metrics.js";
import { RawConnection } from "./support/rpc.js";

/** An access log line (`--log-format json`, at debug). */
interface Access {
  method: string;
  path: string;
  status: number;
  bytes: number;
}

function accessLines(server: RunningServer): Access[] {
  return server
    .logs()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Access & { msg: string })
    .filter((entry) => entry.msg === "request");
}

/**
 * Runs `act` and returns the one access line it caused for `method path`, with the change of the
 * route's `sandbox_agent_http_response_bytes_total` over it (the metrics request is a route of
 * its own, so it does not count here).
 */
async function observe(
  server: RunningServer,
  method: string,
  route: string,
  act: () => Promise<void>,
  pathname = route,
): Promise<{ access: Access; metricBytes: number }> {
  const series = `sandbox_agent_http_response_bytes_total{method="${method}",route="${route}"}`;
  const bytesBefore = await metric(server, series).catch(() => 0);
  const matches = () => accessLines(server).filter((a) => a.method === method && a.path === pathname);
  const seen = matches().length;
  await act();
  await waitFor(() => matches().length > seen, 10_000, `access line of ${method} ${pathname}`);
  assert.equal(matches().length, seen + 1, "one access line per response");
  return { access: matches().at(-1)!, metricBytes: (await metric(server, series)) - bytesBefore };
}

/** A request over node:http (no `accept-encoding`, the body as sent): status and body bytes. */
function get(
  server: RunningServer,
  target: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${server.baseUrl}${target}`, { headers: server.headers(headers) }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () =>
        resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }),
      );
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

describe("body bytes in the access log and the metrics", () => {
  let server: RunningServer;
  let root: string;
  before(async () => {
    root = tempDir("response-bytes-");
    server = await startServer({ args: ["--log-level", "debug", "--log-format", "json", "--fs-root", root] });
  });
  after(() => server.stop());

  it("a 202 counts no body bytes", async () => {
    const conn = await RawConnection.open(server);
    const { access, metricBytes } = await observe(server, "POST", "/v2/rpc", async () => {
      assert.equal((await conn.post({ jsonrpc: "2.0", id: 1, method: "x/ping" })).status, 202);
    });
    assert.deepEqual([access.status, access.bytes, metricBytes], [202, 0, 0]);
    await conn.delete();
  });

  it("a problem answer counts its problem+json body", async () => {
    let body: Buffer = Buffer.alloc(0);
    const { access, metricBytes } = await observe(server, "GET", "/v2/rpc", async () => {
      const answer = await get(server, "/v2/rpc");
      assert.equal(answer.status, 406);
      body = answer.body;
    });
    assert.ok(body.length > 0);
    assert.deepEqual([access.status, access.bytes, metricBytes], [406, body.length, body.length]);
  });

  it("a static file counts the bytes sent, compressed or not", async () => {
    for (const encoding of ["identity", "br"]) {
      let body: Buffer = Buffer.alloc(0);
      const { access, metricBytes } = await observe(
        server,
        "GET",
        "/ui/{file}",
        async () => {
          const answer = await get(server, "/ui/favicon.svg", { "accept-encoding": encoding });
          assert.equal(answer.status, 200);
          assert.equal(answer.headers["content-encoding"], encoding === "br" ? "br" : undefined);
          body = answer.body;
        },
        "/ui/favicon.svg",
      );
      assert.ok(body.length > 0);
      assert.deepEqual([access.bytes, metricBytes], [body.length, body.length], encoding);
    }
  });

  it("an h2c response counts each body byte once", async () => {
    const session = connectH2(server.baseUrl);
    try {
      for (const [target, status] of [
        ["/v2/health", 200],
        ["/v2/rpc", 406],
      ] as const) {
        let length = 0;
        const route = target;
        const { access, metricBytes } = await observe(server, "GET", route, async () => {
          const stream = session.request({ ":path": target, ...server.headers() });
          let answered = 0;
          stream.on("response", (headers) => (answered = Number(headers[":status"])));
          stream.on("data", (chunk: Buffer) => (length += chunk.length));
          await new Promise((resolve, reject) => stream.on("end", resolve).on("error", reject));
          assert.equal(answered, status);
        });
        assert.ok(length > 0);
        assert.deepEqual([access.status, access.bytes, metricBytes], [status, length, length], target);
      }
    } finally {
      session.close();
    }
  });

  it("an SSE stream the client closes counts every byte it was sent", async () => {
    const conn = await RawConnection.open(server);
    let received = 0;
    const { access, metricBytes } = await observe(server, "GET", "/v2/rpc", async () => {
      const abort = new AbortController();
      const response = await conn.get({ accept: "text/event-stream" }, abort.signal);
      assert.equal(response.status, 200);
      const reader = response.body!.getReader();
      const decoder = new TextDecoder();
      let text = "";
      assert.equal((await conn.post({ jsonrpc: "2.0", id: 7, method: "x/ping" })).status, 202);
      // The agent's answer to id 7 (method not found) is the last event the server writes.
      while (!text.includes('"id":7')) {
        const next = await reader.read();
        assert.ok(!next.done, "the stream stays open");
        received += next.value.length;
        text += decoder.decode(next.value, { stream: true });
      }
      abort.abort();
    });
    assert.deepEqual([access.status, access.bytes, metricBytes], [200, received, received]);
    await conn.delete();
  });

  it("a client that leaves mid-response: the bytes handed to the socket until then", async () => {
    const size = 32 * 1024 * 1024;
    writeFileSync(path.join(root, "big.bin"), Buffer.alloc(size, 7));
    let received = 0;
    const { access, metricBytes } = await observe(server, "GET", "/v2/fs/file", async () => {
      const socket = connect(server.port, "127.0.0.1");
      socket.write(`GET /v2/fs/file?path=big.bin HTTP/1.1\r\nhost: 127.0.0.1:${server.port}\r\n\r\n`);
      let head = "";
      await new Promise<void>((resolve) =>
        socket.on("data", (chunk: Buffer) => {
          if (!head.includes("\r\n\r\n")) {
            head += chunk.toString("latin1");
            const end = head.indexOf("\r\n\r\n");
            if (end !== -1) received = head.length - end - 4;
          } else received += chunk.length;
          if (received >= 1024 * 1024) resolve();
        }),
      );
      socket.destroy();
    });
    assert.equal(access.status, 200);
    assert.equal(access.bytes, metricBytes);
    assert.ok(
      access.bytes >= received && access.bytes < size,
      `${access.bytes} of ${size}, ${received} received`,
    );
  });
});
