#!/usr/bin/env node
// Inspector page budget: asset sizes (raw, gzip, brotli) and first render in headless Chromium on
// loopback, against a baseline in the same run (navigating the same browser to one small static
// file of the same server), plus the server's RSS before and after serving the page.
//   node bench/inspector.mjs [--runs N] [--json]
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { launchChromium, repoRoot, startServer } from "@sandbox-agent/testkit";

const asJson = process.argv.includes("--json");
const runsArg = process.argv.indexOf("--runs");
const RUNS = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 15;
const TOKEN = "bench-token";
const assetsDir = path.join(repoRoot, "packages/inspector/dist/ui");
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const p95 = (values) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * 0.95))];
const rssMB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]) / 1024;

function assetSizes() {
  const sizes = { raw: 0, gzip: 0, brotli: 0, files: 0 };
  for (const entry of readdirSync(assetsDir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || /\.(gz|br)$/.test(entry.name)) continue;
    const file = path.join(entry.parentPath, entry.name);
    const size = statSync(file).size;
    sizes.files++;
    sizes.raw += size;
    sizes.gzip += existsSync(`${file}.gz`) ? statSync(`${file}.gz`).size : size;
    sizes.brotli += existsSync(`${file}.br`) ? statSync(`${file}.br`).size : size;
  }
  return sizes;
}

async function main() {
  if (!existsSync(path.join(assetsDir, "index.html"))) throw new Error("build first: npm run build");
  const sizes = assetSizes();
  const server = await startServer({ token: TOKEN });
  await new Promise((r) => setTimeout(r, 1000));
  const idleRss = rssMB(server.process.pid);
  const browser = await launchChromium();
  const firstRender = [];
  const baseline = [];
  try {
    for (let i = 0; i < RUNS; i++) {
      // A fresh context each time: empty cache, so every run downloads every asset.
      const context = await browser.newContext();
      const page = await context.newPage();
      let start = performance.now();
      await page.goto(`${server.baseUrl}/ui/favicon.svg`);
      baseline.push(performance.now() - start);
      start = performance.now();
      await page.goto(`${server.baseUrl}/ui/#token=${TOKEN}`);
      await page.getByTestId("new-session").waitFor();
      firstRender.push(performance.now() - start);
      await context.close();
    }
  } finally {
    await browser.close();
  }
  const afterRss = rssMB(server.process.pid);
  await server.stop();
  const result = {
    date: new Date().toISOString().slice(0, 10),
    node: process.version,
    cpus: os.cpus().length,
    assets: sizes,
    firstRenderMs: { median: median(firstRender), p95: p95(firstRender), runs: RUNS },
    baselineStaticFileMs: { median: median(baseline) },
    serverRssMB: { idle: idleRss, afterServingPage: afterRss },
  };
  if (asJson) return console.log(JSON.stringify(result, null, 2));
  const kb = (n) => `${(n / 1024).toFixed(1)} KB`;
  console.log(`| metric | value | target |`);
  console.log(`| --- | --- | --- |`);
  console.log(
    `| inspector assets (${sizes.files} files) raw / gzip / brotli | ${kb(sizes.raw)} / ${kb(sizes.gzip)} / ${kb(sizes.brotli)} | gzip ≤ 300 KB ${sizes.gzip <= 300 * 1024 ? "✓" : "✗"} |`,
  );
  console.log(
    `| first render, cold cache, median / p95 of ${RUNS} (ms) | ${median(firstRender).toFixed(0)} / ${p95(firstRender).toFixed(0)} | ≤ 1000 ms ${p95(firstRender) <= 1000 ? "✓" : "✗"} |`,
  );
  console.log(
    `| baseline: same browser, one static file (ms) | ${median(baseline).toFixed(0)} (first render ×${(median(firstRender) / median(baseline)).toFixed(1)}) | |`,
  );
  console.log(
    `| server RSS idle → after ${RUNS} page loads (MB) | ${idleRss.toFixed(1)} → ${afterRss.toFixed(1)} | |`,
  );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
