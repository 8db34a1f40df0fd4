import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { startServer, tempDir, type RunningServer } from "@sandbox-agent/testkit";
import { rssBytes } from "./support/procs.js";

const MiB = 1024 * 1024;
const FILE_SIZE = 200 * MiB;
/** Resident memory the server may gain while moving the file: far below its size. */
const MAX_RSS_GROWTH = 96 * MiB;

/**
 * A `total`-byte body of 1 MiB chunks that each differ (chunk index in the first bytes). Its sha256
 * is computed up front, so the upload runs as fast as the socket allows and a server without
 * backpressure would have to buffer it.
 */
function generatedBody(total: number): { stream: ReadableStream<Uint8Array>; sha256: string } {
  const block = randomBytes(MiB);
  const chunkAt = (offset: number): Buffer => {
    const chunk = Buffer.from(block.subarray(0, Math.min(MiB, total - offset)));
    chunk.writeUInt32BE(offset / MiB, 0);
    return chunk;
  };
  const hash = createHash("sha256");
  for (let offset = 0; offset < total; offset += MiB) hash.update(chunkAt(offset));
  let sent = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent >= total) return controller.close();
      const chunk = chunkAt(sent);
      sent += chunk.length;
      controller.enqueue(chunk);
    },
  });
  return { stream, sha256: hash.digest("hex") };
}

/** PUT with a streamed body (Node's fetch needs half-duplex for that). */
function putStream(url: string, body: ReadableStream<Uint8Array>, signal?: AbortSignal): Promise<Response> {
  const init: RequestInit & { duplex: "half" } = {
    method: "PUT",
    headers: { "content-type": "application/octet-stream" },
    body,
    duplex: "half",
    signal: signal ?? AbortSignal.timeout(60_000),
  };
  return fetch(url, init);
}

/** Samples the server's RSS every 50 ms until stopped; returns the peak. */
function watchRss(pid: number): () => number {
  let peak = rssBytes(pid);
  const timer = setInterval(() => (peak = Math.max(peak, rssBytes(pid))), 50);
  return () => {
    clearInterval(timer);
    return Math.max(peak, rssBytes(pid));
  };
}

describe("filesystem API streaming", () => {
  let server: RunningServer;
  let limited: RunningServer;
  let root: string;

  before(async () => {
    root = tempDir("fs-stream-");
    [server, limited] = await Promise.all([
      startServer({ args: ["--fs-root", root] }),
      startServer({ args: ["--fs-root", root, "--fs-max-upload", "1000"] }),
    ]);
  });
  after(async () => {
    await Promise.all([server.stop(), limited.stop()]);
  });

  it(
    "streams a 200 MiB upload and download without buffering it in memory",
    { timeout: 120_000 },
    async () => {
      const pid = server.process.pid!;
      const baseline = rssBytes(pid);
      const body = generatedBody(FILE_SIZE);
      const uploadPeak = watchRss(pid);
      const upload = await putStream(
        `${server.baseUrl}/v2/fs/file?path=big/data.bin&parents=true`,
        body.stream,
      );
      const uploadRss = uploadPeak();
      assert.equal(upload.status, 201);
      assert.equal(((await upload.json()) as { size: number }).size, FILE_SIZE);
      assert.equal(statSync(path.join(root, "big/data.bin")).size, FILE_SIZE);
      assert.deepEqual(readdirSync(path.join(root, "big")), ["data.bin"]);

      const downloadPeak = watchRss(pid);
      const download = await fetch(`${server.baseUrl}/v2/fs/file?path=big/data.bin`);
      assert.equal(download.status, 200);
      assert.equal(download.headers.get("content-length"), String(FILE_SIZE));
      const hash = createHash("sha256");
      let received = 0;
      const reader = download.body!.getReader();
      for (let next = await reader.read(); !next.done; next = await reader.read()) {
        hash.update(next.value);
        received += next.value.length;
      }
      const downloadRss = downloadPeak();
      assert.equal(received, FILE_SIZE);
      assert.equal(hash.digest("hex"), body.sha256);
      for (const [what, peak] of [
        ["upload", uploadRss],
        ["download", downloadRss],
      ] as const) {
        const growth = peak - baseline;
        assert.ok(growth < MAX_RSS_GROWTH, `${what} grew RSS by ${(growth / MiB).toFixed(1)} MiB`);
      }

      const tail = await fetch(`${server.baseUrl}/v2/fs/file?path=big/data.bin`, {
        headers: { range: `bytes=${FILE_SIZE - MiB}-` },
      });
      assert.equal(tail.status, 206);
      const last = Buffer.from(await tail.arrayBuffer());
      assert.equal(last.length, MiB);
      assert.equal(last.readUInt32BE(0), FILE_SIZE / MiB - 1);
    },
  );

  it("rejects uploads over --fs-max-upload with 413 and leaves nothing behind", async () => {
    const small = await fetch(`${limited.baseUrl}/v2/fs/file?path=ok.bin`, {
      method: "PUT",
      body: new Uint8Array(1000),
    });
    assert.equal(small.status, 201);
    const declared = await fetch(`${limited.baseUrl}/v2/fs/file?path=too-big.bin`, {
      method: "PUT",
      body: new Uint8Array(5000),
    });
    assert.equal(declared.status, 413);
    assert.equal(declared.headers.get("content-type"), "application/problem+json");
    // Chunked, so the server only finds out while streaming.
    const streamed = await putStream(
      `${limited.baseUrl}/v2/fs/file?path=too-big.bin`,
      generatedBody(3 * MiB).stream,
    );
    assert.equal(streamed.status, 413);
    assert.equal(existsSync(path.join(root, "too-big.bin")), false);
    assert.ok(!readdirSync(root).some((name) => name.endsWith(".upload")), "temp file removed");
  });

  it("refuses a large upload up front (409) and stays usable", async () => {
    const response = await putStream(
      `${server.baseUrl}/v2/fs/file?path=big/data.bin&overwrite=false`,
      generatedBody(FILE_SIZE).stream,
    );
    assert.equal(response.status, 409);
    const problem = (await response.json()) as { type: string };
    assert.equal(problem.type, "https://sandboxagent.dev/problems/already-exists");
    assert.equal(statSync(path.join(root, "big/data.bin")).size, FILE_SIZE);
    assert.equal((await fetch(`${server.baseUrl}/v2/health`)).status, 200);
  });

  it("an aborted upload leaves neither the file nor a temp file", async () => {
    const controller = new AbortController();
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        if (sent === 4) {
          controller.abort();
          return;
        }
        sent++;
        c.enqueue(new Uint8Array(MiB));
        await new Promise((r) => setTimeout(r, 20));
      },
    });
    await assert.rejects(putStream(`${server.baseUrl}/v2/fs/file?path=aborted.bin`, body, controller.signal));
    const clean = async () => !readdirSync(root).some((n) => n.includes("aborted.bin"));
    const deadline = Date.now() + 5000;
    while (!(await clean()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.ok(await clean(), `left behind: ${readdirSync(root).join(", ")}`);
    const health = await fetch(`${server.baseUrl}/v2/health`);
    assert.equal(health.status, 200);
  });
});
