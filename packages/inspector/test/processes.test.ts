import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { isDeepStrictEqual } from "node:util";
import type { Page } from "playwright-core";
import { SandboxAgentClient } from "sandbox-agent";
import { repoRoot, tempDir, waitFor } from "@sandbox-agent/testkit";
import { chromiumGate } from "./support/browser.js";
import { InspectorFixture } from "./support/inspector-page.js";

const TOKEN = "inspector-processes-token";
const STEP_MS = 20_000;
const assetsBuilt = existsSync(path.join(repoRoot, "packages/inspector/dist/ui/index.html"));

/** The text on a page's terminal, one string per row, read from xterm.js's DOM rows. */
async function terminalRows(page: Page): Promise<string[]> {
  const rows = await page.locator("[data-testid=terminal] .xterm-rows > div").allTextContents();
  return rows.map((row) => row.replace(/\u00a0/g, " ").trimEnd());
}

async function waitForRow(page: Page, pattern: RegExp, what: string): Promise<string> {
  let found: string | undefined;
  await waitFor(
    async () => (found = (await terminalRows(page)).findLast((row) => pattern.test(row))) !== undefined,
    STEP_MS,
    what,
  );
  return found!;
}

/** Types a command line into the terminal that has the keyboard focus. */
async function typeLine(page: Page, line: string): Promise<void> {
  await page.keyboard.type(line);
  await page.keyboard.press("Enter");
}

/** The open process' id, from the address (`#/processes/<id>`). */
function openProcessId(page: Page): string {
  const match = /#\/processes\/(.+)$/.exec(page.url());
  assert.ok(match, page.url());
  return decodeURIComponent(match[1]!);
}

/** The Processes tab: terminals (xterm.js over the SDK's WebSocket) and background processes. */
describe("inspector processes and terminals in Chromium", { skip: chromiumGate, timeout: 240_000 }, () => {
  let ui: InspectorFixture;
  let page: Page;
  let api: SandboxAgentClient;
  let terminalId: string;
  const workdir = tempDir("inspector-processes-");
  const logText = () => page.getByTestId("process-log").innerText();
  const processStatus = () => page.getByTestId("process-status").innerText();
  /** `rows x cols` as the shell inside sees them; the marker keeps the answer apart from the command. */
  const sttySize = async (target = page) => {
    const marker = `size-${Math.random().toString(36).slice(2, 8)}`;
    await typeLine(target, `echo ${marker}-$(stty size | tr ' ' x)`);
    const row = await waitForRow(target, new RegExp(`^${marker}-\\d+x\\d+$`), "stty size");
    const [rows, cols] = row
      .slice(marker.length + 1)
      .split("x")
      .map(Number);
    return { rows: rows!, cols: cols! };
  };
  /** Starts `sh` with `args` (an argument line, as typed) from the page's form. */
  const startShellLine = async (args: string) => {
    await page.getByTestId("process-command").fill("sh");
    await page.getByTestId("process-args").fill(args);
    await page.getByTestId("start-process").click();
  };
  /** The terminal size the server has for the process. */
  const serverSize = async () => {
    const { cols, rows } = await api.processes.get(terminalId);
    return { rows: rows ?? 0, cols: cols ?? 0 };
  };

  before(async () => {
    assert.ok(assetsBuilt, "the inspector is not built: run `npm run build` first");
    ui = await InspectorFixture.start({ token: TOKEN, workdir });
    page = ui.page;
    api = new SandboxAgentClient({
      baseUrl: ui.server.baseUrl,
      token: TOKEN,
      agent: "-",
      autoConnect: false,
    });
    await page.goto(`${ui.proxy.url}/ui/#token=${TOKEN}`);
    await page.getByRole("button", { name: "Processes" }).click();
  });

  after(() => ui?.close());

  it("opens a terminal with the default shell in the working directory and runs a command", async () => {
    await page.getByTestId("new-terminal").click();
    await page.locator("[data-testid=terminal] .xterm-rows").waitFor();
    await waitFor(
      async () => /connected · \d+×\d+/.test(await page.getByTestId("terminal-status").innerText()),
      STEP_MS,
      "the terminal to connect",
    );
    terminalId = openProcessId(page);
    await waitForRow(page, /[#$]$/, "the shell's prompt");
    const row = page.getByTestId("process-row").filter({ hasText: "SHELL" });
    assert.match(await row.innerText(), /running/);
    assert.match(await row.innerText(), /tty/);
    await typeLine(page, "echo $((6*7)); pwd");
    await waitForRow(page, /^42$/, "the answer in the terminal");
    // The answer is a row of its own (not the echoed command line), and the shell runs in the workdir.
    assert.ok((await terminalRows(page)).includes(workdir), "pwd is the working directory");
    // Colours, 24-bit ones included, are drawn as the program asked.
    await typeLine(page, String.raw`printf '\033[38;2;255;100;0m%s\033[0m\n' truecolor`);
    await waitForRow(page, /^truecolor$/, "the coloured word");
    const word = page.locator("[data-testid=terminal] .xterm-rows span", { hasText: /^truecolor$/ });
    assert.equal(await word.evaluate((span) => getComputedStyle(span).color), "rgb(255, 100, 0)");
    // The lazily loaded terminal chunk and its stylesheet came from the server.
    const chunks = ui.requests
      .map((r) => new URL(r.url()).pathname)
      .filter((p) => /terminal-session/.test(p));
    assert.ok(chunks.some((p) => p.endsWith(".js")) && chunks.some((p) => p.endsWith(".css")), `${chunks}`);
    console.log(`terminal screenshot: ${await ui.shot("11-terminal")}`);
  });

  it("follows the panel: a smaller window resizes the terminal the shell sees", async () => {
    const before = await sttySize();
    assert.deepEqual(await serverSize(), before);
    await page.setViewportSize({ width: 960, height: 560 });
    await waitFor(
      async () => (await serverSize()).cols < before.cols && (await serverSize()).rows < before.rows,
      STEP_MS,
      "the server to get the smaller size",
    );
    // The panel may settle in more than one resize (Chromium lays the smaller window out in steps):
    // the shell and the server must come to agree on the last one.
    let after = { rows: 0, cols: 0 };
    const seen: string[] = [];
    await waitFor(
      async () => {
        const server = await serverSize();
        after = await sttySize();
        seen.push(`server ${server.rows}x${server.cols} shell ${after.rows}x${after.cols}`);
        return isDeepStrictEqual(after, server) && isDeepStrictEqual(await serverSize(), server);
      },
      STEP_MS,
      "the shell and the server to agree on the terminal's size",
    );
    console.log(`terminal sizes after the resize: ${seen.join(", ")}`);
    assert.ok(after.cols < before.cols && after.rows < before.rows, `${seen}`);
    assert.match(
      await page.getByTestId("terminal-status").innerText(),
      new RegExp(`${after.cols}×${after.rows}`),
    );
    // The live list shows it too.
    await waitFor(
      async () =>
        (await page.getByTestId("process-pane").innerText()).includes(`terminal ${after.cols}×${after.rows}`),
      STEP_MS,
      "the process' new size in the page",
    );
    await ui.shot("12-terminal-resized");
    await page.setViewportSize({ width: 1280, height: 800 });
    await waitFor(async () => (await serverSize()).cols > after.cols, STEP_MS, "the size to grow back");
  });

  it("shows the same terminal to a second viewer, both ways", async () => {
    const second = await ui.newPage();
    await second.goto(`${ui.proxy.url}/ui/#token=${TOKEN}`);
    await second.getByTestId("nav").waitFor();
    await second.evaluate((id) => (location.hash = `#/processes/${encodeURIComponent(id)}`), terminalId);
    // The server replays the scrollback to a new viewer.
    await waitForRow(second, /^42$/, "the scrollback in the second viewer");
    await second.getByTestId("terminal").click();
    await typeLine(second, "echo viewer-$((2+3))");
    await waitForRow(second, /^viewer-5$/, "the answer in the second viewer");
    await waitForRow(page, /^viewer-5$/, "the second viewer's command in the first");
    await ui.shot("13-second-viewer", second);
    await second.close();
    assert.match(await page.getByTestId("terminal-status").innerText(), /connected/);
  });

  it("reconnects the terminal after a network cut, showing each line once", async () => {
    await page.getByTestId("terminal").click();
    assert.ok(ui.proxy.cut() > 0, "the cut dropped the page's connections");
    await waitFor(
      async () => /reconnecting|connecting/.test(await page.getByTestId("terminal-status").innerText()),
      STEP_MS,
      "the page to notice",
    );
    await new Promise((resolve) => setTimeout(resolve, 500)); // the network stays down a while
    ui.proxy.restore();
    await waitFor(
      async () => /connected ·/.test(await page.getByTestId("terminal-status").innerText()),
      STEP_MS,
      "the terminal to reconnect",
    );
    await typeLine(page, "echo back-$((1+1))");
    await waitForRow(page, /^back-2$/, "a command after the reconnect");
    const rows = await terminalRows(page);
    assert.equal(rows.filter((row) => row === "42").length, 1, "the replayed scrollback replaced the screen");
  });

  it("shows the shell's exit in the terminal, its status line and the list", async () => {
    await typeLine(page, "exit 4");
    await waitForRow(page, /^\[process ended: exit code 4\]$/, "the exit in the terminal");
    assert.match(await page.getByTestId("terminal-status").innerText(), /process ended: exit code 4/);
    const row = page.getByTestId("process-row").filter({ hasText: "SHELL" });
    await waitFor(
      async () => /exit code 4/.test(await row.innerText()),
      STEP_MS,
      "the list to show the exit",
    );
  });

  it("runs a background process and follows its stdout and stderr live", async () => {
    await startShellLine(
      `-c 'i=0; while :; do i=$((i+1)); echo "out $i"; echo "err $i" >&2; sleep 0.1; done'`,
    );
    await waitFor(async () => /out 3\n/.test(await logText()), STEP_MS, "output to stream");
    await waitFor(async () => /out 12\n/.test(await logText()), STEP_MS, "more output, live");
    const log = page.getByTestId("process-log");
    assert.match(await log.locator(".log-stderr").first().innerText(), /^err 1\n/);
    assert.doesNotMatch(await log.locator(".log-stdout").first().innerText(), /err/);
    await ui.shot("14-process-logs");
    await page.getByTestId("process-stop").click();
    await waitFor(async () => /SIGTERM/.test(await processStatus()), STEP_MS, "the process to stop");
    await waitFor(
      async () => /ended: killed by SIGTERM/.test(await page.locator(".log-status").innerText()),
      STEP_MS,
      "the log to end",
    );
    // Every line once, in order.
    const lines = (await log.locator(".log-stdout").allInnerTexts()).join("").split("\n").filter(Boolean);
    assert.deepEqual(
      lines,
      lines.map((_, i) => `out ${i + 1}`),
    );
    const row = page.getByTestId("process-row").filter({ hasText: "out $i" });
    assert.match(await row.innerText(), /killed by SIGTERM/);
    await page.getByTestId("process-remove").click();
    await waitFor(async () => (await row.count()) === 0, STEP_MS, "the process to leave the list");
    await page.getByText("No process open").waitFor();
  });

  it("sends input to a process, then end-of-file, and shows its exit code", async () => {
    await startShellLine(`-c 'while read line; do echo "got $line"; done; echo "stdin closed"; exit 3'`);
    await page.getByTestId("stdin").fill("hello there");
    await page.keyboard.press("Enter");
    await waitFor(async () => /got hello there\n/.test(await logText()), STEP_MS, "the echoed input");
    await page.getByTestId("stdin-eof").click();
    await waitFor(async () => /exit code 3/.test(await processStatus()), STEP_MS, "the exit");
    assert.match(await logText(), /stdin closed/);
    assert.equal(await page.getByTestId("stdin").count(), 0, "no input once stdin is closed");
    await ui.shot("15-process-exited");
  });

  it("made no request outside the server, put the token in no URL, raised no page error", () => {
    const terminals = ui.webSockets.filter((url) => /\/v2\/processes\/[^/]+\/terminal\?ticket=/.test(url));
    assert.ok(terminals.length >= 3, `terminal WebSockets with tickets: ${ui.webSockets.join(", ")}`);
    ui.assertClean();
  });
});
