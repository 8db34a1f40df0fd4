import assert from "node:assert/strict";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer as createNetServer, type Server } from "node:net";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { startServer, tempDir, type RunningServer } from "@sandbox-agent/testkit";
import { CaseSource } from "./support/fuzz-gen.js";
import { FuzzRun } from "./support/fuzz-run.js";
import { rssBytes } from "./support/procs.js";

/** Replay a run with `SANDBOX_AGENT_FUZZ_SEED=<seed>`; lengthen it with `SANDBOX_AGENT_FUZZ_MS` / `_CASES`. */
const SEED = Number(process.env.SANDBOX_AGENT_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const BUDGET_MS = Number(process.env.SANDBOX_AGENT_FUZZ_MS ?? 8000);
const MAX_CASES = Number(process.env.SANDBOX_AGENT_FUZZ_CASES ?? 4000);
/** Cases in flight at once, each on its own connection. */
const CONCURRENCY = 16;
/** RSS is sampled after this many cases (start-up and first-use allocations done) and at the end. */
const WARM_UP_CASES = 200;
/** How much the server's RSS may grow from there (V8 keeps freed heap for a while). */
const MAX_RSS_GROWTH = 96 * 1024 * 1024;

const MiB = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

/**
 * Thousands of hostile requests per run, over raw HTTP/1.1 sockets and h2c: JSON-RPC messages to a
 * live mock-agent connection (odd ids, deep nesting, `__proto__` keys, `_sandboxagent/*` methods
 * with random params), initializes, control-plane and filesystem requests with bad escapes and
 * odd bodies, and requests node:http's parser must refuse (bad request lines, headers, chunking,
 * truncated and oversized bodies). No answer may be a 5xx, every error must be problem+json, and
 * the server must be alive, healthy and about as big as after warm-up at the end.
 */
describe("fuzz", () => {
  let server: RunningServer;
  let socketFile: Server;

  before(async () => {
    const root = tempDir("fuzz-root-");
    mkdirSync(path.join(root, "dir", "sub"), { recursive: true });
    writeFileSync(path.join(root, "dir", "file.txt"), "inside");
    writeFileSync(path.join(root, "file.txt"), "inside");
    symlinkSync("loop-b", path.join(root, "loop-a"));
    symlinkSync("loop-a", path.join(root, "loop-b"));
    symlinkSync(tempDir("fuzz-outside-"), path.join(root, "link-out"));
    socketFile = createNetServer();
    await new Promise<void>((resolve) => socketFile.listen(path.join(root, "agent.sock"), resolve));
    server = await startServer({ args: ["--fs-root", root] });
  });
  after(async () => {
    await server.stop();
    socketFile.close();
  });

  it(`survives a seeded run (seed ${SEED})`, async () => {
    process.stdout.write(`# fuzz seed ${SEED} (replay: SANDBOX_AGENT_FUZZ_SEED=${SEED})\n`);
    const source = new CaseSource(SEED);
    const run = new FuzzRun(server, CONCURRENCY);
    const alive = () => server.process.exitCode === null && server.process.signalCode === null;
    await run.open();
    for (const fuzzCase of source.corpus()) if (alive()) await run.run(fuzzCase);

    const started = Date.now();
    let issued = 0;
    let warmRss = 0;
    const worker = async () => {
      while (issued < MAX_CASES && Date.now() - started < BUDGET_MS && alive()) {
        if (++issued === WARM_UP_CASES) warmRss = rssOf(server);
        await run.run(source.next());
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const seconds = (Date.now() - started) / 1000;
    const survived = alive();
    const health = survived ? (await fetch(`${server.baseUrl}/v2/health`)).status : 0;
    const rss = rssOf(server);
    run.close();

    const statuses = [...run.statuses].sort((a, b) => a[0] - b[0]);
    const summary =
      `seed ${SEED}: ${run.total} cases in ${seconds.toFixed(1)} s ${JSON.stringify(Object.fromEntries(run.counts))}; ` +
      `statuses ${JSON.stringify(Object.fromEntries(statuses))}; RSS ${MiB(warmRss)} → ${MiB(rss)}`;
    process.stdout.write(`# ${summary}\n`);
    const lastSent = run.recent.join("\n");
    assert.ok(
      survived,
      `the server died (seed ${SEED}); the last requests sent:\n${lastSent}\n${server.logs().slice(-4000)}`,
    );
    assert.equal(health, 200);
    assert.deepEqual(run.findings.slice(0, 10), [], `${run.findings.length} bad answers; ${summary}`);
    assert.ok(run.total >= 300, `too few cases to mean anything: ${summary}`);
    assert.ok(rss - warmRss < MAX_RSS_GROWTH, `RSS grew by ${MiB(rss - warmRss)}: ${summary}`);
  });
});

/** The server's RSS, or 0 once it is gone. */
function rssOf(server: RunningServer): number {
  try {
    return rssBytes(server.process.pid!);
  } catch {
    return 0;
  }
}
