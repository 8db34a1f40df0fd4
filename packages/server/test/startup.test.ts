import assert from "node:assert/strict";
import { existsSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";
import { compiledServerBin, startServer, tempDir, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { RawConnection } from "./support/rpc.js";

const moduleLog = fileURLToPath(new URL("./support/module-log.js", import.meta.url));

/** A new connection to the mock agent with its stream open, one session and one `echo hi` turn. */
async function echoTurn(server: RunningServer) {
  const conn = await RawConnection.open(server, "mock");
  const sse = await conn.openSse();
  const sessionId = await conn.newSession(sse);
  const promptId = await conn.send("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text: "echo hi" }],
  });
  const answer = await sse.waitFor((m) => m.id === promptId && m.method === undefined);
  return { conn, sse, sessionId, answer };
}

/** What start-up loads decides start time and idle memory: the control plane and zod load on first use. */
describe("start-up loads only the transport and health", () => {
  let server: RunningServer;
  const logFile = path.join(tempDir("module-log-"), "modules.txt");
  const loaded = () => (existsSync(logFile) ? readFileSync(logFile, "utf8").split("\n") : []);
  const loadedZod = () => loaded().some((url) => url.includes("/node_modules/zod/"));
  /** The built-in modules the server loaded so far, `require`d ones too (see module-log.ts). */
  const builtins = async (): Promise<string[]> => {
    const list = `${logFile}.builtins`;
    rmSync(list, { force: true });
    server.process.kill("SIGUSR2");
    const text = await waitFor(
      () => {
        const written = existsSync(list) ? readFileSync(list, "utf8") : "";
        return written.endsWith("end\n") ? written : undefined;
      },
      5000,
      "the server's list of built-in modules",
    );
    return text.split("\n");
  };

  before(async () => {
    server = await startServer({
      bin: compiledServerBin,
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
      // HTTP/2 (and the TLS and crypto modules it pulls in) loads with the first h2c connection.
      "node:http2",
      // Each built-in imported at start costs idle memory; these load on first use (`lazy-builtins.ts`).
      "node:zlib",
      "node:fs/promises",
    ])
      assert.equal(
        loaded().some((url) => url.includes(lazy)),
        false,
        lazy,
      );
  });

  it("sets its V8 flags and watches garbage collections from the first connection, not before", async () => {
    const atStart = await builtins();
    // The list is real: the start path's built-ins are in it.
    assert.ok(atStart.includes("node:http"));
    // node:v8 for the flags (server-v8-flags.ts), node:perf_hooks for the young generation's cap.
    for (const lazy of ["node:v8", "node:perf_hooks"])
      assert.equal(atStart.includes(lazy), false, `an idle server loaded ${lazy}`);
    const conn = await RawConnection.open(server, "mock");
    const afterConnection = await builtins();
    for (const lazy of ["node:v8", "node:perf_hooks"]) assert.ok(afterConnection.includes(lazy), lazy);
    await conn.delete();
  });

  it("deletes a connection's event log without fs.rmSync's rimraf (a built-in compiled without the code cache under its flags)", async () => {
    const { conn, sse } = await echoTurn(server);
    const log = path.join(server.dataDir, "event-log", conn.id);
    assert.ok(existsSync(log), `the connection's log is at ${log}`);
    sse.close();
    assert.equal((await conn.delete()).status, 202);
    await waitFor(() => !existsSync(log), 5000, "the connection's log deleted");
    const loadedBuiltins = await builtins();
    assert.ok(loadedBuiltins.includes("node:internal/fs/utils"), "the list names internal modules");
    assert.equal(loadedBuiltins.includes("node:internal/fs/rimraf"), false);
  });

  it("runs a connection's first initialize, session/new and turn without loading zod", async () => {
    const { conn, sse, sessionId, answer } = await echoTurn(server);
    assert.equal(answer.result?.stopReason, "end_turn");
    // The Sandbox extensions ran (they load with the first connection)…
    assert.ok(loaded().some((url) => url.endsWith("/dist/src/extensions/methods.js")));
    // …and so does `{ sessionId }` checking, by hand, with a -32602 saying what is wrong.
    const models = await conn.call(sse, "_sandboxagent/session/list_models", { sessionId });
    assert.equal(models.error, undefined);
    const invalid = await conn.call(sse, "_sandboxagent/session/list_models", { sessionId: 5 });
    assert.equal(invalid.error?.code, -32602);
    assert.deepEqual((invalid.error?.data as { issues: unknown }).issues, [
      { path: "sessionId", message: "expected a string, received number" },
    ]);
    assert.equal(loadedZod(), false, "zod loaded on the first connection's path");
    // A method whose params have a zod schema loads it then.
    const metadata = await conn.call(sse, "_sandboxagent/session/set_metadata", { sessionId, metadata: 5 });
    assert.equal(metadata.error?.code, -32602);
    assert.ok(loadedZod());
    sse.close();
    await conn.delete();
  });

  it("loads the rest of the control plane on its first request, with the same 404/405 answers", async () => {
    const wrongMethod = await fetch(`${server.baseUrl}/v2/agents`, { method: "DELETE" });
    assert.equal(wrongMethod.status, 405);
    assert.equal(wrongMethod.headers.get("allow"), "GET");
    assert.equal(wrongMethod.headers.get("content-type"), "application/problem+json");
    assert.ok(loaded().some((url) => url.endsWith("/dist/src/control-plane/routes.js")));
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

/**
 * The server's V8 flags (the interrupt budget, the inlining cap) come after the first connection's
 * one-time imports: under the budget, their module resolution made `path`'s normalizeString hot
 * enough for a TurboFan job no request needs (bench/README.md, "Cold window, outlining"). And the
 * built-ins the server loads after them still compile from Node's code cache, which V8 refuses
 * while any flag differs from Node's build: `withDefaultV8Flags` puts V8's defaults back around
 * those loads, so a flag set without its default in DEFAULT_FLAGS, or with a wrong one, fails here.
 */
describe("the server's V8 flags", () => {
  let server: RunningServer;
  const logFile = path.join(tempDir("flag-log-"), "modules.txt");
  const flagLog = fileURLToPath(new URL("./support/v8-flag-log.js", import.meta.url));
  const lines = () => readFileSync(logFile, "utf8").split("\n");

  before(async () => {
    server = await startServer({
      bin: compiledServerBin,
      // `--expose-internals` (for the code cache's counts) is not allowed in NODE_OPTIONS.
      wrapper: ["/bin/sh", "-c", 'exec "$0" --expose-internals "$@"'],
      env: { NODE_OPTIONS: `--import=${moduleLog} --import=${flagLog}`, MODULE_LOG_FILE: logFile },
    });
  });
  after(() => server.stop());

  it("are set once the first connection's extensions have loaded, not before", async () => {
    const conn = await RawConnection.open(server, "mock");
    const extensions = lines().findIndex((line) => line.endsWith("/dist/src/extensions/index.js"));
    assert.ok(extensions >= 0, "the log shows the extensions' import");
    for (const flag of ["--interrupt-budget=8000", "--max-inlined-bytecode-size=230"]) {
      const set = lines().indexOf(`flag ${flag}`);
      assert.ok(set > extensions, `${flag} at line ${set}, the extensions at ${extensions}`);
    }
    await conn.delete();
  });

  it("leave the built-ins loaded after them compiling from Node's code cache", async () => {
    const { conn } = await echoTurn(server);
    // A connection's id loaded node:crypto, the event log's first frame node:zlib (its crc32),
    // each after the first flag, the modules each brought listed when the server's flags came back.
    const firstFlag = lines().findIndex((line) => line.startsWith("flag "));
    const lazyLoads = ["crypto", "zlib"].map((name) => {
      const at = lines().findIndex((line) => line.startsWith("loaded ") && line.split(" ").includes(name));
      assert.ok(at > firstFlag, `${name} loaded at line ${at}, the first flag at ${firstFlag}`);
      return lines()[at]!.split(" ").slice(1);
    });
    const uncached = lines().filter((line) => line.startsWith("uncached "));
    assert.ok(uncached.length > 0, "the log reads the code cache's counts (--expose-internals)");
    // Node's own lazy loads under the server's flags compile from source, once per process
    // (internal/fs/rimraf was one, `fs.rmSync`'s: the store deletes files without it, see above).
    const compiledFromSource = new Set(uncached.at(-1)!.split(" ").slice(1));
    assert.deepEqual(
      lazyLoads.flat().filter((name) => compiledFromSource.has(name)),
      [],
      "built-ins loaded with V8's defaults compiled without Node's code cache",
    );
    await conn.delete();
  });
});
