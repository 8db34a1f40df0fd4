import assert from "node:assert/strict";
import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { Page, Request } from "playwright-core";
import { repoRoot, tempDir, waitFor } from "@sandbox-agent/testkit";
import { chromiumGate } from "./support/browser.js";
import { conversation } from "./support/conversation.js";
import { InspectorFixture } from "./support/inspector-page.js";

const TOKEN = "inspector-test-token";
const STEP_MS = 20_000;
const assetsBuilt = existsSync(path.join(repoRoot, "packages/inspector/dist/ui/index.html"));

/**
 * Stands in for npm (the server runs `$SANDBOX_AGENT_NPM install … name@version`): prints a progress
 * line, waits until the test has seen it in the page (a `go` file appears), then "installs" the
 * packages by writing their package.json. No registry is contacted.
 */
function fakeNpm(): string {
  const file = path.join(tempDir("fake-npm-"), "npm");
  writeFileSync(
    file,
    `#!${process.execPath}
const fs = require("node:fs");
const specs = process.argv.slice(2).filter((a) => !a.startsWith("-") && a !== "install");
console.error("npm http fetch GET 200 https://registry.example/" + specs.join(" ") + " 12ms (fake)");
const started = Date.now();
const wait = () => {
  if (!fs.existsSync("go") && Date.now() - started < 30000) return setTimeout(wait, 20);
  for (const spec of specs) {
    const at = spec.lastIndexOf("@");
    const name = spec.slice(0, at);
    fs.mkdirSync("node_modules/" + name, { recursive: true });
    fs.writeFileSync("node_modules/" + name + "/package.json", JSON.stringify({ name, version: spec.slice(at + 1) }));
  }
  console.error("added " + specs.length + " packages (fake)");
};
wait();
`,
  );
  chmodSync(file, 0o755);
  return file;
}

/** The page against the real server (mock agent), through a proxy the test can cut. */
describe("inspector in Chromium", { skip: chromiumGate, timeout: 240_000 }, () => {
  let ui: InspectorFixture;
  let page: Page;
  let requests: Request[];
  const workdir = tempDir("inspector-workdir-");
  const shot = (name: string) => ui.shot(name);
  const { agentText, send, sendTurn, allowOnce } = conversation(() => page, STEP_MS);

  before(async () => {
    assert.ok(assetsBuilt, "the inspector is not built: run `npm run build` first");
    writeFileSync(path.join(workdir, "README.md"), "# A sandbox\n");
    ui = await InspectorFixture.start({ token: TOKEN, workdir, env: { SANDBOX_AGENT_NPM: fakeNpm() } });
    ({ page, requests } = ui);
  });

  after(() => ui?.close());

  it("without the token shows nothing but the sign-in form", async () => {
    await page.goto(`${ui.proxy.url}/ui/`);
    await page.getByTestId("token-input").waitFor();
    const text = await page.locator("body").innerText();
    assert.match(text, /requires a token/);
    assert.doesNotMatch(text, /Mock agent|sandbox-agent-mock|connections/);
    // Every API request it made was refused, and it asked for nothing but the health probe.
    const api = requests.filter((r) => new URL(r.url()).pathname.startsWith("/v2/"));
    assert.ok(api.length > 0);
    for (const request of api) {
      assert.equal(new URL(request.url()).pathname, "/v2/health");
      assert.equal((await request.response())?.status(), 401);
    }
    await page.getByTestId("token-input").fill("wrong-token");
    await page.keyboard.press("Enter");
    await page.getByTestId("token-error").waitFor();
    await shot("01-token-required");
  });

  it("signs in from the URL fragment, keeps the token for the tab and wipes it from the address", async () => {
    const start = Date.now();
    await page.goto(`${ui.proxy.url}/ui/#token=${TOKEN}`);
    await page.getByTestId("new-session").waitFor();
    const firstRenderMs = Date.now() - start;
    console.log(`inspector first render (navigation to usable page, loopback): ${firstRenderMs} ms`);
    assert.ok(!page.url().includes(TOKEN), page.url());
    assert.equal(await page.evaluate(() => sessionStorage.getItem("sandbox-agent.token")), TOKEN);
    const authed = requests.filter((r) => r.headers().authorization === `Bearer ${TOKEN}`);
    assert.ok(authed.length > 0, "API requests carry the bearer header");
    // A reload signs in from sessionStorage.
    await page.reload();
    await page.getByTestId("new-session").waitFor();
  });

  it("starts a mock session and streams the answer as markdown", async () => {
    await page.getByTestId("new-session").click();
    await page.getByTestId("prompt").waitFor();
    await sendTurn("echo hello from the **inspector**");
    assert.equal(await agentText(), "hello from the inspector");
    assert.equal(await page.getByTestId("agent-message").last().locator("strong").innerText(), "inspector");
    assert.equal(
      await page.getByTestId("user-message").last().innerText(),
      "echo hello from the **inspector**",
    );
    assert.match(await page.getByTestId("turn-end").last().innerText(), /end_turn/);
  });

  it("renders agent HTML inert (shown as text, no script, no handlers, no javascript: links)", async () => {
    const html = `<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>`;
    await sendTurn(
      `json ${html} [link](javascript:window.__xss=3) <b style="position:fixed;inset:0">styled</b> after`,
    );
    const message = page.getByTestId("agent-message").last();
    const text = await message.innerText();
    assert.ok(text.includes(html), text);
    assert.ok(text.includes(`<b style="position:fixed;inset:0">styled</b> after`), text);
    await message.locator("a").click();
    assert.equal(await page.evaluate(() => (window as { __xss?: number }).__xss), undefined);
    assert.equal(await message.locator("script, img, b, [onerror], [style]").count(), 0);
    assert.equal(await message.locator("a").getAttribute("href"), null);
  });

  it("shows plans as checklists and thoughts collapsed", async () => {
    await sendTurn("think weighing the options; plan read the code | write the fix | run the tests");
    const plan = page.getByTestId("plan").last();
    assert.equal(await plan.locator("li").count(), 3);
    assert.equal(await plan.locator("input:checked").count(), 0);
    const thought = page.locator("details.thought").last();
    assert.equal(await thought.getAttribute("open"), null);
  });

  it("answers a permission request and shows the tool call complete with its diff", async () => {
    await send("write notes.md hello from the inspector");
    const permission = page.getByTestId("permission").last();
    await permission.getByRole("button", { name: "Allow once" }).waitFor();
    const tool = page.getByTestId("tool-call").last();
    assert.match(await tool.innerText(), /pending|running/);
    await shot("02-permission");
    await allowOnce();
    assert.match(await tool.locator("tr.add").first().innerText(), /hello from the inspector/);
    await waitFor(async () => (await agentText()) === "wrote notes.md", STEP_MS, "the agent's report");
    assert.equal(readFileSync(path.join(workdir, "notes.md"), "utf8"), "hello from the inspector");
    await shot("03-tool-call-completed");
  });

  it("sets a mode and a model, renames the session, and cancels a turn", async () => {
    await page.getByTestId("config-mode").selectOption("plan");
    await page.locator(".note", { hasText: "mode: plan" }).last().waitFor();
    await page.getByTestId("config-model").selectOption("mock-smart");
    await waitFor(
      async () => (await page.getByTestId("config-model").inputValue()) === "mock-smart",
      STEP_MS,
      "model",
    );
    await page.getByTestId("rename").click();
    await page.getByTestId("title-input").fill("Inspector test session");
    await page.keyboard.press("Enter");
    await waitFor(
      async () =>
        (await page.getByTestId("session-row").first().innerText()).includes("Inspector test session"),
      STEP_MS,
      "the session list to show the new title",
    );
    assert.equal(await page.getByTestId("session-title").innerText(), "Inspector test session");
    await send("hang");
    await page.getByTestId("cancel").click();
    await waitFor(
      async () => /cancelled/.test(await page.getByTestId("turn-end").last().innerText()),
      STEP_MS,
      "cancel",
    );
  });

  it("keeps streaming across a network cut without losing or duplicating events", async () => {
    const expected = Array.from({ length: 40 }, (_, i) => `chunk ${i + 1} `).join("");
    await send("slow 40 50");
    await waitFor(async () => (await agentText()).includes("chunk 5 "), STEP_MS, "the stream to start");
    const dropped = ui.proxy.cut();
    assert.ok(dropped > 0, "the cut dropped the page's connections");
    await new Promise((resolve) => setTimeout(resolve, 1000)); // the network stays down a while
    ui.proxy.restore();
    await waitFor(
      async () => /end_turn/.test(await page.getByTestId("turn-end").last().innerText()),
      30_000,
      "turn end",
    );
    assert.equal((await agentText()).trim(), expected.trim());
    await shot("04-after-network-cut");
    await page.getByTestId("raw-tab").click();
    const ids = (await page.getByTestId("event-id").allInnerTexts()).filter(Boolean);
    assert.ok(ids.length > 40);
    assert.equal(new Set(ids).size, ids.length, "every event id appears once");
    const resumed = requests.filter((r) => r.method() === "GET" && r.headers()["last-event-id"]);
    assert.ok(resumed.length > 0, "the stream was resumed with Last-Event-ID");
    await shot("05-raw-json-rpc");
    await page.getByRole("button", { name: "Conversation" }).click();
  });

  it("browses, views, uploads and downloads files", async () => {
    await page.getByRole("button", { name: "Files" }).click();
    await page.getByTestId("file-entry").filter({ hasText: "notes.md" }).click();
    await waitFor(
      async () => (await page.getByTestId("file-text").innerText()) === "hello from the inspector",
      STEP_MS,
      "preview",
    );
    await shot("06-files");
    const download = page.waitForEvent("download");
    await page.getByTestId("download").click();
    const file = await (await download).path();
    assert.equal(readFileSync(file, "utf8"), "hello from the inspector");
    await page
      .getByTestId("upload")
      .setInputFiles({ name: "upload.txt", mimeType: "text/plain", buffer: Buffer.from("uploaded") });
    await page.getByTestId("file-entry").filter({ hasText: "upload.txt" }).waitFor();
    assert.equal(readFileSync(path.join(workdir, "upload.txt"), "utf8"), "uploaded");
  });

  it("lists agents with their install state and installs one with live progress", async () => {
    await page.getByRole("button", { name: "Agents" }).click();
    const mock = page.getByTestId("agent-mock");
    await mock.waitFor();
    assert.match(await mock.innerText(), /installed/);
    const agent = page.getByTestId("agent-sdk-example");
    assert.match(await agent.innerText(), /not installed/);
    await agent.getByTestId("install").click();
    // The progress line is on screen while npm still runs.
    await waitFor(
      async () => /fetch GET 200/.test(await agent.getByTestId("install-log").innerText()),
      STEP_MS,
      "progress",
    );
    assert.equal(await agent.getByTestId("install").innerText(), "Installing…");
    await shot("07-agent-installing");
    writeFileSync(path.join(ui.server.dataDir, "agents", "sdk-example", "go"), "");
    await waitFor(
      async () => /installed 1\.9\.0 in/.test(await agent.innerText()),
      STEP_MS,
      "the install result",
    );
    await waitFor(
      async () => /Reinstall/.test(await agent.getByTestId("install").innerText()),
      STEP_MS,
      "the new state",
    );
    await shot("08-agents");
  });

  it("shows an agent crash with its exit code and stderr tail", async () => {
    await page.getByRole("button", { name: "Sessions" }).click();
    await send("stderr 100; crash 3");
    const ended = page.locator(".error-item.ended").last();
    await ended.waitFor({ timeout: STEP_MS });
    assert.match(await ended.innerText(), /agent_exited/);
    assert.match(await ended.innerText(), /exit code 3/);
    assert.match(await ended.innerText(), /xxxx/);
    await shot("09-agent-crash");
  });

  it("made no request outside the server, put the token in no URL, raised no page error", () => {
    ui.assertClean();
  });
});
