import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";
import { startServer, tempDir, type RunningServer } from "@sandbox-agent/testkit";
import { RawConnection } from "./support/rpc.js";

const moduleLog = fileURLToPath(new URL("./support/module-log.js", import.meta.url));

/** What start-up loads decides start time and idle memory: the control plane and zod load on first use. */
describe("start-up loads only the transport and health", () => {
  let server: RunningServer;
  const logFile = path.join(tempDir("module-log-"), "modules.txt");
  const loaded = () => (existsSync(logFile) ? readFileSync(logFile, "utf8").split("\n") : []);
  const loadedZod = () => loaded().some((url) => url.includes("/node_modules/zod/"));

  before(async () => {
    server = await startServer({
      env: { NODE_OPTIONS: `--import=${moduleLog}`, MODULE_LOG_FILE: logFile },
    });
  });
  after(() => server.stop());

  it("serves /v2/health without loading zod or the control plane", async () => {
    const response = await fetch(`${server.baseUrl}/v2/health`);
    assert.equal(response.status, 200);
    assert.equal(((await response.json()) as { status: string }).status, "ok");
    // The hook saw the server's own modules, so an empty or broken log cannot pass this test.
    assert.ok(loaded().some((url) => url.endsWith("/dist/src/http/listener.js")));
    assert.equal(loadedZod(), false);
    for (const lazy of [
      "/dist/src/control-plane/fs",
      "/dist/src/control-plane/processes",
      "/node_modules/ws/",
    ])
      assert.equal(
        loaded().some((url) => url.includes(lazy)),
        false,
        lazy,
      );
  });

  it("loads the rest of the control plane on its first request, with the same 404/405 answers", async () => {
    const wrongMethod = await fetch(`${server.baseUrl}/v2/agents`, { method: "DELETE" });
    assert.equal(wrongMethod.status, 405);
    assert.equal(wrongMethod.headers.get("allow"), "GET");
    assert.equal(wrongMethod.headers.get("content-type"), "application/problem+json");
    assert.ok(loadedZod());
    const missing = await fetch(`${server.baseUrl}/v2/nothing-here`);
    assert.equal(missing.status, 404);
    assert.equal(missing.headers.get("content-type"), "application/problem+json");
    const agents = await fetch(`${server.baseUrl}/v2/agents`);
    assert.equal(agents.status, 200);
  });

  it("runs the Sandbox extensions from the first connection on", async () => {
    const conn = await RawConnection.open(server, "mock");
    const sse = await conn.openSse();
    const sessionId = await conn.newSession(sse);
    const answer = await conn.call(sse, "_sandboxagent/session/list_models", { sessionId });
    assert.equal(answer.error, undefined);
    const invalid = await conn.call(sse, "_sandboxagent/session/set_metadata", { sessionId, metadata: 5 });
    assert.equal(invalid.error?.code, -32602);
    sse.close();
    await conn.delete();
  });
});
