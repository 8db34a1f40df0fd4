import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { Page } from "playwright-core";
import { SandboxAgentClient } from "sandbox-agent";
import { repoRoot, tempDir, waitFor } from "@sandbox-agent/testkit";
import { chromiumGate } from "./support/browser.js";
import { InspectorFixture } from "./support/inspector-page.js";

const TOKEN = "inspector-connections-token";
const STEP_MS = 20_000;
const assetsBuilt = existsSync(path.join(repoRoot, "packages/inspector/dist/ui/index.html"));

/**
 * The Sessions tab's list of the server's connections: one opened by a script (not the page)
 * shows up, and the page attaches to it and follows the answer to a prompt the script sends.
 */
describe("inspector: the server's connections in Chromium", { skip: chromiumGate, timeout: 180_000 }, () => {
  let ui: InspectorFixture;
  let page: Page;
  let script: SandboxAgentClient;
  const workdir = tempDir("inspector-connections-");

  before(async () => {
    assert.ok(assetsBuilt, "the inspector is not built: run `npm run build` first");
    ui = await InspectorFixture.start({ token: TOKEN, workdir });
    page = ui.page;
    await page.goto(`${ui.proxy.url}/ui/#token=${TOKEN}`);
  });

  after(async () => {
    await script?.dispose();
    await ui?.close();
  });

  it("lists a script's connection, opens it and shows the streamed answer to the script's prompt", async () => {
    script = new SandboxAgentClient({ baseUrl: ui.server.baseUrl, token: TOKEN, agent: "mock" });
    const { sessionId } = await script.newSession({ cwd: workdir, metadata: { title: "Script session" } });
    await script.prompt({ sessionId, prompt: "echo warm-up" });
    const connectionId = script.connectionId!;
    // While the script reads the stream, the page does not offer to take it.
    const row = page.locator(`[data-testid=server-connection][data-connection-id="${connectionId}"]`);
    await row.waitFor({ timeout: STEP_MS });
    // The row can first show the connection as it was listed (before the script's stream and
    // prompt); the live list then catches up.
    await waitFor(
      async () => /read by another client/.test(await row.innerText()),
      STEP_MS,
      "the script's reader",
    );
    assert.equal(await row.getByTestId("attach").count(), 0);
    // The script hands the connection over (its stream ends; the agent keeps running).
    await script.release();

    // The live list catches up with the release: nobody reads the connection's stream now.
    await waitFor(async () => /no reader/.test(await row.innerText()), STEP_MS, "the released connection");
    const listed = await row.innerText();
    assert.match(listed, /mock/);
    assert.match(listed, /open/);
    assert.match(listed, /pid \d+/);
    assert.match(listed, /Script session/);
    assert.doesNotMatch(listed, /this page/);

    await row.getByTestId("attach").click();
    await waitFor(async () => /attached here/.test(await row.innerText()), STEP_MS, "the attach badge");

    // The script prompts over plain HTTP on the connection the page now reads.
    const answer = "echo from the script to the inspector";
    const posted = await fetch(`${ui.server.baseUrl}/v2/rpc`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${TOKEN}`,
        "content-type": "application/json",
        "acp-connection-id": connectionId,
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: "script-1",
        method: "session/prompt",
        params: { sessionId, prompt: [{ type: "text", text: answer }] },
      }),
    });
    assert.equal(posted.status, 202);
    const conversation = page.locator(".main");
    await waitFor(
      async () => (await conversation.innerText()).includes("from the script to the inspector"),
      STEP_MS,
      "the script's answer in the conversation",
    );
    console.log(`conversation: ${await ui.shot("20-attached-conversation")}`);
    // The raw view shows the same stream with event ids.
    await page.getByTestId("raw-tab").click();
    await waitFor(
      async () => /session\/update/.test(await conversation.innerText()),
      STEP_MS,
      "the raw view",
    );
    assert.match(await conversation.innerText(), /result #script-1/);
    console.log(`raw view: ${await ui.shot("21-attached-raw")}`);

    // A session the page starts itself: its connection is listed as the page's own.
    await page.getByTestId("new-session").click();
    const own = page.getByTestId("server-connection").filter({ hasText: "this page" });
    await own.waitFor({ timeout: STEP_MS });
    assert.equal(await page.getByTestId("server-connection").count(), 2);
    assert.equal(await own.getByTestId("attach").count(), 0);
    ui.assertClean();
  });
});
