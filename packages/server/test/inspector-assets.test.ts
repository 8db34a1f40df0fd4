import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync, brotliDecompressSync } from "node:zlib";
import { after, before, describe, it } from "node:test";
import {
  compiledServerBin,
  repoRoot,
  startServer,
  tempDir,
  type RunningServer,
} from "@sandbox-agent/testkit";

const moduleLog = fileURLToPath(new URL("./support/module-log.js", import.meta.url));
const assetsDir = path.join(repoRoot, "packages/inspector/dist/ui");
const TOKEN = "assets-test-token";

/** The built script's name (content-hashed). */
function builtScript(): string {
  const name = readdirSync(path.join(assetsDir, "assets")).find((f) => f.endsWith(".js"));
  assert.ok(name, "the inspector is built (npm run build)");
  return name;
}

/** The inspector's files: public (they hold no data), cached by content hash, loaded on first use. */
describe("inspector files at /ui/", () => {
  let server: RunningServer;
  const logFile = path.join(tempDir("module-log-"), "modules.txt");
  const loaded = () => (existsSync(logFile) ? readFileSync(logFile, "utf8").split("\n") : []);
  const workdir = tempDir("inspector-assets-workdir-");

  before(async () => {
    assert.ok(existsSync(path.join(assetsDir, "index.html")), "the inspector is built (npm run build)");
    writeFileSync(path.join(workdir, "page.html"), "<script>fetch('/v2/agents')</script>");
    server = await startServer({
      token: TOKEN,
      bin: compiledServerBin,
      args: ["--workdir", workdir],
      env: { NODE_OPTIONS: `--import=${moduleLog}`, MODULE_LOG_FILE: logFile },
    });
  });
  after(() => server.stop());

  it("loads nothing of the inspector until /ui is requested", async () => {
    assert.equal((await fetch(`${server.baseUrl}/v2/health`, { headers: server.headers() })).status, 200);
    assert.ok(loaded().some((url) => url.endsWith("/dist/src/http/listener.js")));
    assert.equal(
      loaded().some((url) => url.includes("/dist/src/ui/routes.js")),
      false,
    );
    assert.equal((await fetch(`${server.baseUrl}/ui/`)).status, 200);
    assert.ok(loaded().some((url) => url.includes("/dist/src/ui/routes.js")));
  });

  it("serves the page without the token, with a strict CSP and revalidation", async () => {
    const response = await fetch(`${server.baseUrl}/ui/`, { headers: { "accept-encoding": "identity" } });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("content-type"), "text/html; charset=utf-8");
    assert.equal(response.headers.get("cache-control"), "no-cache");
    assert.match(
      response.headers.get("content-security-policy") ?? "",
      /default-src 'none'.*connect-src 'self'/,
    );
    assert.equal(response.headers.get("x-content-type-options"), "nosniff");
    const html = await response.text();
    assert.equal(html, readFileSync(path.join(assetsDir, "index.html"), "utf8"));
    const etag = response.headers.get("etag")!;
    const again = await fetch(`${server.baseUrl}/ui/`, { headers: { "if-none-match": etag } });
    assert.equal(again.status, 304);
    // The API stays behind the token.
    assert.equal((await fetch(`${server.baseUrl}/v2/agents`)).status, 401);
    assert.equal((await fetch(`${server.baseUrl}/v2/health`)).status, 401);
  });

  it("serves hashed assets immutable, pre-compressed by accept-encoding", async () => {
    const url = `${server.baseUrl}/ui/assets/${builtScript()}`;
    const original = readFileSync(path.join(assetsDir, "assets", builtScript()));
    const plain = await fetch(url, { headers: { "accept-encoding": "identity" } });
    assert.equal(plain.headers.get("content-type"), "text/javascript; charset=utf-8");
    assert.equal(plain.headers.get("cache-control"), "public, max-age=31536000, immutable");
    assert.equal(plain.headers.get("content-encoding"), null);
    assert.deepEqual(Buffer.from(await plain.arrayBuffer()), original);
    // Raw bytes: node:http does not decode, so the encoding itself is checked.
    const raw = async (encoding: string) => {
      const { request } = await import("node:http");
      return new Promise<{ headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
        request(url, { headers: { "accept-encoding": encoding } }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
        })
          .on("error", reject)
          .end();
      });
    };
    const br = await raw("gzip, deflate, br");
    assert.equal(br.headers["content-encoding"], "br");
    assert.equal(br.headers.vary, "accept-encoding");
    assert.deepEqual(brotliDecompressSync(br.body), original);
    const gzip = await raw("gzip, br;q=0");
    assert.equal(gzip.headers["content-encoding"], "gzip");
    assert.deepEqual(gunzipSync(gzip.body), original);
  });

  it("redirects /ui to /ui/ and refuses anything outside the build", async () => {
    const redirect = await fetch(`${server.baseUrl}/ui`, { redirect: "manual" });
    assert.equal(redirect.status, 308);
    assert.equal(redirect.headers.get("location"), "/ui/");
    for (const probe of [
      "/ui/..%2Fpackage.json",
      "/ui/assets/..%2F..%2Fpackage.json",
      "/ui/.hidden",
      "/ui/nope.js",
    ]) {
      const response = await fetch(`${server.baseUrl}${probe}`);
      assert.equal(response.status, 404, probe);
      assert.equal(response.headers.get("content-type"), "application/problem+json");
    }
    assert.equal((await fetch(`${server.baseUrl}/ui/`, { method: "POST" })).status, 405);
  });

  it("accepts the page's own origin on the API, never a foreign one", async () => {
    const headers = (origin: string) => server.headers({ origin });
    const own = await fetch(`${server.baseUrl}/v2/agents`, { headers: headers(server.baseUrl) });
    assert.equal(own.status, 200);
    const foreign = await fetch(`${server.baseUrl}/v2/agents`, { headers: headers("http://evil.example") });
    assert.equal(foreign.status, 403);
    const otherPort = new URL(server.baseUrl);
    otherPort.port = String(Number(otherPort.port) + 1);
    const sibling = await fetch(`${server.baseUrl}/v2/agents`, { headers: headers(otherPort.origin) });
    assert.equal(sibling.status, 403);
  });

  it("serves sandbox files sandboxed, so a page an agent wrote cannot act as the server's origin", async () => {
    const response = await fetch(`${server.baseUrl}/v2/fs/file?path=/page.html`, {
      headers: server.headers(),
    });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("content-security-policy"), "sandbox");
    assert.equal(response.headers.get("x-content-type-options"), "nosniff");
  });
});
