import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";
import { repoRoot, startServer, tempDir, type RunningServer } from "@sandbox-agent/testkit";
import { agentText, RawConnection } from "./support/rpc.js";

const bundleDir = path.join(repoRoot, "packages/server/bundle");
const moduleLog = fileURLToPath(new URL("./support/module-log.js", import.meta.url));
const inspectorBuild = path.join(repoRoot, "packages/inspector/dist/ui");

/** Every file below `dir`, relative to it, with its contents. */
function tree(dir: string): Map<string, string> {
  return new Map(
    readdirSync(dir, { recursive: true, encoding: "utf8" })
      .filter((name) => statSync(path.join(dir, name)).isFile())
      .sort()
      .map((name) => [name, readFileSync(path.join(dir, name), "latin1")]),
  );
}
const { version } = JSON.parse(readFileSync(path.join(repoRoot, "packages/server/package.json"), "utf8")) as {
  version: string;
};

/**
 * The bundle must run where there is nothing but `node`: it is copied into an empty temp directory
 * (no node_modules anywhere above it) before it is started.
 */
describe("self-contained server bundle", () => {
  let dir: string;
  let server: RunningServer;
  const logFile = () => path.join(dir, "modules.txt");
  const loadedFiles = () =>
    new Set(
      (existsSync(logFile()) ? readFileSync(logFile(), "utf8").split("\n") : [])
        .filter((url) => url.startsWith("file:") && url.includes(dir))
        .map((url) => path.basename(fileURLToPath(url))),
    );

  before(async () => {
    assert.ok(
      existsSync(path.join(bundleDir, "sandbox-agent.mjs")),
      "no bundle: run `npm run bundle -w @sandbox-agent/server` (npm run build does it too)",
    );
    dir = tempDir("server-bundle-");
    cpSync(bundleDir, path.join(dir, "server"), { recursive: true });
    server = await startServer({
      bin: path.join(dir, "server/sandbox-agent.mjs"),
      env: { NODE_OPTIONS: `--import=${moduleLog}`, MODULE_LOG_FILE: logFile(), NODE_PATH: undefined },
    });
  });
  after(async () => {
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("is a handful of files with no node_modules, and reports the package version", () => {
    const files = readdirSync(path.join(dir, "server"));
    assert.ok(files.includes("mock-agent.mjs"), "the mock agent is its own file");
    assert.ok(!files.includes("node_modules"));
    const bytes = [...tree(path.join(dir, "server")).values()].reduce((sum, data) => sum + data.length, 0);
    assert.ok(bytes < 2 * 1024 * 1024, `bundle is ${bytes} bytes`);
    const printed = execFileSync(
      process.execPath,
      [path.join(dir, "server/sandbox-agent.mjs"), "--version"],
      {
        cwd: dir,
        encoding: "utf8",
      },
    );
    assert.equal(printed.trim(), version);
  });

  it("starts without loading the control plane, and loads it on first use", async () => {
    const health = (await (await fetch(`${server.baseUrl}/v2/health`)).json()) as { version: string };
    assert.equal(health.version, version);
    const atStart = loadedFiles();
    assert.ok(atStart.has("sandbox-agent.mjs"), [...atStart].join(", "));
    const agents = (await (await fetch(`${server.baseUrl}/v2/agents`)).json()) as {
      agents: Array<{ id: string; installed: boolean }>;
    };
    assert.deepEqual(
      agents.agents.filter((a) => a.id === "mock").map((a) => a.installed),
      [true],
      "the built-in mock agent is found beside the bundle",
    );
    const afterControlPlane = loadedFiles();
    assert.ok(
      afterControlPlane.size > atStart.size,
      `control plane chunks load on first use: ${atStart.size} files at start, ${afterControlPlane.size} after`,
    );
  });

  it("serves the inspector page from beside itself", async () => {
    const page = await fetch(`${server.baseUrl}/ui/`);
    assert.equal(page.status, 200);
    const html = await page.text();
    const scripts = [...html.matchAll(/src="(\/ui\/assets\/[^"]+\.js)"/g)].map((m) => m[1]!);
    assert.ok(scripts.length > 0, html);
    for (const script of scripts) {
      const asset = await fetch(`${server.baseUrl}${script}`, { headers: { "accept-encoding": "gzip" } });
      assert.equal(asset.status, 200, script);
      assert.equal(asset.headers.get("content-encoding"), "gzip");
      assert.equal(await asset.text(), readFileSync(path.join(inspectorBuild, script.slice(4)), "utf8"));
    }
  });

  it("--if-stale refreshes a stale copy of the inspector page without rebundling the code", () => {
    const out = path.join(dir, "stale");
    cpSync(bundleDir, out, { recursive: true });
    writeFileSync(path.join(out, "ui/index.html"), "an older build");
    writeFileSync(path.join(out, "ui/assets/gone.js"), "a file the new build does not have");
    // The code is up to date: its stamp is newer than every compiled file.
    const future = new Date(Date.now() + 60_000);
    utimesSync(path.join(out, "VERSION"), future, future);
    const script = path.join(repoRoot, "packages/server/scripts/bundle.mjs");
    const run = () =>
      execFileSync(process.execPath, [script, "--if-stale", "--out", out], { encoding: "utf8" });
    assert.match(run(), /inspector page updated/);
    assert.deepEqual(tree(path.join(out, "ui")), tree(inspectorBuild));
    assert.match(run(), /up to date/);
  });

  it("completes an ACP turn with the bundled mock agent", async () => {
    const conn = await RawConnection.open(server, "mock");
    const sse = await conn.openSse();
    const sessionId = await conn.newSession(sse, dir);
    const promptId = await conn.send("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "echo from the bundle; write made.txt bundled" }],
    });
    const ask = await sse.waitFor((m) => m.method === "session/request_permission");
    await conn.post({
      jsonrpc: "2.0",
      id: ask.id,
      result: { outcome: { outcome: "selected", optionId: "allow_once" } },
    });
    const answer = await sse.waitFor((m) => m.id === promptId && m.method === undefined);
    assert.equal(answer.result?.stopReason, "end_turn");
    assert.equal(agentText(sse.messages(), sessionId), "from the bundlewrote made.txt");
    assert.equal(readFileSync(path.join(dir, "made.txt"), "utf8"), "bundled");
    sse.close();
    await conn.delete();
  });
});
