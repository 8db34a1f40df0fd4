#!/usr/bin/env node
// Inspector page budget: asset sizes (raw, gzip, brotli) of the page and of its lazily loaded
// terminal, first render and terminal opening in headless Chromium on loopback, each against a
// baseline in the same run: navigating the same browser to one small static file of the same
// server, and the same command line typed into a terminal over the SDK's WebSocket from Node. Plus
// the server's RSS before and after serving the page.
//   node bench/inspector.mjs [--runs N] [--json]
/* global document -- in functions that run in the page */
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { launchChromium, repoRoot, startServer } from "@sandbox-agent/testkit";
import { UsageError, benchArgs, runMain, usageFail } from "./common.mjs";
import { SandboxAgentClient } from "sandbox-agent";

const args = benchArgs(import.meta.url, { runs: { type: "string", default: "15" } });
const asJson = args.json;
const RUNS = Number(args.runs);
if (!Number.isInteger(RUNS) || RUNS < 1)
  usageFail(import.meta.url, `--runs takes a whole number of at least 1, not "${args.runs}"`);
const LINES = 20;
const TOKEN = "bench-token";
const assetsDir = path.join(repoRoot, "packages/inspector/dist/ui");
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const p95 = (values) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * 0.95))];
const log = (message) => process.stderr.write(`${message}\n`);
const rssMB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]) / 1024;

/**
 * Sizes of the built files in three groups: the page (index.html, the icon and what index.html
 * loads), the terminal chunk (xterm.js, loaded on first use) and any other lazy chunk.
 */
function assetSizes() {
  const html = readFileSync(path.join(assetsDir, "index.html"), "utf8");
  const group = (name) =>
    name === "index.html" || name === "favicon.svg" || html.includes(`/${name}"`)
      ? "page"
      : name.startsWith("terminal-")
        ? "terminal"
        : "otherLazy";
  const sizes = {};
  for (const entry of readdirSync(assetsDir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || /\.(gz|br)$/.test(entry.name)) continue;
    const file = path.join(entry.parentPath, entry.name);
    const size = statSync(file).size;
    const sum = (sizes[group(entry.name)] ??= { raw: 0, gzip: 0, brotli: 0, files: 0 });
    sum.files++;
    sum.raw += size;
    sum.gzip += existsSync(`${file}.gz`) ? statSync(`${file}.gz`).size : size;
    sum.brotli += existsSync(`${file}.br`) ? statSync(`${file}.br`).size : size;
  }
  return sizes;
}

/** Waits until a row of the page's terminal (xterm.js's DOM renderer) is `text`, or ends with it. */
const waitForRow = (page, text, { exact }) =>
  page.waitForFunction(
    ({ text, exact }) =>
      [...document.querySelectorAll("[data-testid=terminal] .xterm-rows > div")].some((row) => {
        const shown = row.textContent.trimEnd();
        return exact ? shown === text : shown.endsWith(text);
      }),
    { text, exact },
    { polling: "raf" },
  );

/**
 * Enter → the command's output on screen, `LINES` times (ms). The command is typed first and not
 * timed: Playwright types one key per round trip, which would swamp what is measured.
 */
async function enterInPage(page) {
  const times = [];
  for (let i = 0; i < LINES; i++) {
    await page.keyboard.type(`echo page-${i}`);
    await waitForRow(page, `echo page-${i}`, { exact: false });
    const start = performance.now();
    await page.keyboard.press("Enter");
    await waitForRow(page, `page-${i}`, { exact: true });
    times.push(performance.now() - start);
  }
  return times;
}

/** The shell the page's "New terminal" starts. */
const SHELL = { command: "sh", args: ["-c", 'exec "${SHELL:-/bin/sh}"'], tty: true };

/** A terminal over the SDK's WebSocket from Node (no browser, no rendering), read as text. */
async function nodeTerminal(processes) {
  const started = performance.now();
  const proc = await processes.create(SHELL);
  const terminal = await processes.terminal(proc.id);
  const reader = terminal.readable.getReader();
  const decoder = new TextDecoder();
  let seen = "";
  const until = async (pattern) => {
    while (!pattern.test(seen)) {
      const { done, value } = await reader.read();
      if (done) throw new Error(`the terminal closed before ${pattern}`);
      seen += decoder.decode(value, { stream: true });
    }
  };
  await until(/[#$] $/);
  return { id: proc.id, terminal, until, openMs: performance.now() - started };
}

/** The baselines from Node: create → prompt (`RUNS` times), and Enter → output (`LINES` times). */
async function inNode(baseUrl) {
  const { processes } = new SandboxAgentClient({ baseUrl, token: TOKEN, agent: "-", autoConnect: false });
  const open = [];
  for (let i = 0; i < RUNS; i++) {
    const shell = await nodeTerminal(processes);
    open.push(shell.openMs);
    await processes.remove(shell.id);
  }
  const { id, terminal, until } = await nodeTerminal(processes);
  const enter = [];
  for (let i = 0; i < LINES; i++) {
    terminal.write(`echo node-${i}`);
    await until(new RegExp(`echo node-${i}$`));
    const start = performance.now();
    terminal.write("\r");
    await until(new RegExp(`[\r\n]node-${i}\r\n`)); // bash puts a mode switch before it
    enter.push(performance.now() - start);
  }
  await processes.remove(id);
  return { open, enter };
}

async function main() {
  if (!existsSync(path.join(assetsDir, "index.html"))) throw new UsageError("build first: npm run build");
  const sizes = assetSizes();
  const server = await startServer({ token: TOKEN });
  await new Promise((r) => setTimeout(r, 1000));
  const idleRss = rssMB(server.process.pid);
  const browser = await launchChromium();
  const firstRender = [];
  const baseline = [];
  const terminalOpen = [];
  let enterPage = [];
  try {
    for (let i = 0; i < RUNS; i++) {
      log(`run ${i + 1}/${RUNS}: first render, then a terminal`);
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
      // Click → a shell's prompt in xterm.js: the terminal chunk (cold), a process, a ticket, a WebSocket.
      await page.getByRole("button", { name: "Processes" }).click();
      start = performance.now();
      await page.getByTestId("new-terminal").click();
      await page.waitForFunction(
        () => /[#$] *$/.test(document.querySelector("[data-testid=terminal] .xterm-rows")?.textContent ?? ""),
        null,
        { polling: "raf" },
      );
      terminalOpen.push(performance.now() - start);
      if (i === RUNS - 1) {
        log(`Enter → output, ${LINES} times in the page's terminal…`);
        enterPage = await enterInPage(page);
      }
      await context.close();
    }
  } finally {
    await browser.close();
  }
  log(`the same over the SDK's WebSocket from Node…`);
  const node = await inNode(server.baseUrl);
  const afterRss = rssMB(server.process.pid);
  await server.stop();
  const result = {
    date: new Date().toISOString().slice(0, 10),
    node: process.version,
    cpus: os.cpus().length,
    assets: sizes,
    firstRenderMs: { median: median(firstRender), p95: p95(firstRender), runs: RUNS },
    baselineStaticFileMs: { median: median(baseline) },
    terminalOpenMs: {
      page: { median: median(terminalOpen), p95: p95(terminalOpen) },
      nodeWebSocket: { median: median(node.open), p95: p95(node.open) },
      runs: RUNS,
    },
    enterToOutputMs: {
      page: { median: median(enterPage), p95: p95(enterPage) },
      nodeWebSocket: { median: median(node.enter), p95: p95(node.enter) },
      lines: LINES,
    },
    serverRssMB: { idle: idleRss, afterServingPage: afterRss },
  };
  if (asJson) return console.log(JSON.stringify(result, null, 2));
  const kb = (n) => `${(n / 1024).toFixed(1)} KB`;
  const ms = (n) => n.toFixed(0);
  const size = (group) =>
    group ? `${kb(group.raw)} / ${kb(group.gzip)} / ${kb(group.brotli)} (${group.files} files)` : "none";
  const { page, terminal, otherLazy } = sizes;
  console.log(`| metric | value | target |`);
  console.log(`| --- | --- | --- |`);
  console.log(
    `| page assets raw / gzip / brotli | ${size(page)} | gzip ≤ 300 KB ${page.gzip <= 300 * 1024 ? "✓" : "✗"} |`,
  );
  console.log(`| terminal chunk (xterm.js, loaded on first use) | ${size(terminal)} | not in the budget |`);
  if (otherLazy) console.log(`| other lazy chunks | ${size(otherLazy)} | |`);
  console.log(
    `| first render, cold cache, median / p95 of ${RUNS} (ms) | ${ms(median(firstRender))} / ${ms(p95(firstRender))} | ≤ 1000 ms ${p95(firstRender) <= 1000 ? "✓" : "✗"} |`,
  );
  console.log(
    `| baseline: same browser, one static file (ms) | ${ms(median(baseline))} (first render ×${(median(firstRender) / median(baseline)).toFixed(1)}) | |`,
  );
  console.log(
    `| New terminal → shell prompt, page (cold chunk) / Node WebSocket, median (ms) | ${ms(median(terminalOpen))} / ${ms(median(node.open))} (×${(median(terminalOpen) / median(node.open)).toFixed(1)}) | |`,
  );
  console.log(
    `| Enter → command output, page (xterm.js) / Node WebSocket, median of ${LINES} (ms) | ${ms(median(enterPage))} / ${ms(median(node.enter))} (×${(median(enterPage) / median(node.enter)).toFixed(1)}) | |`,
  );
  console.log(
    `| server RSS idle → after ${RUNS} page loads (MB) | ${idleRss.toFixed(1)} → ${afterRss.toFixed(1)} | |`,
  );
}

runMain(main);
