import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { Page, WebSocket as PageWebSocket } from "playwright-core";
import { repoRoot, tempDir, waitFor } from "@sandbox-agent/testkit";
import { chromiumGate } from "./support/browser.js";
import { conversation } from "./support/conversation.js";
import { InspectorFixture } from "./support/inspector-page.js";

const TOKEN = "inspector-websocket-token";
const STEP_MS = 20_000;
const assetsBuilt = existsSync(path.join(repoRoot, "packages/inspector/dist/ui/index.html"));

/** The sequence number of an event id the WebSocket client counted (`<epoch>.<seq>`). */
const seqOf = (eventId: string) => Number(eventId.split(".")[1]);

/**
 * The page's agent connections over the WebSocket transport, in Chromium, against the real server
 * (mock agent, a token) through a proxy the test can cut.
 */
describe("inspector over the WebSocket transport", { skip: chromiumGate, timeout: 240_000 }, () => {
  let ui: InspectorFixture;
  let page: Page;
  const sockets: PageWebSocket[] = [];
  const workdir = tempDir("inspector-ws-workdir-");
  const { agentText, send, sendTurn, allowOnce, turns } = conversation(() => page, STEP_MS);
  const lastTurnEnd = () => page.getByTestId("turn-end").last().innerText();
  /** Event ids in the raw view (the raw tab must be open), in the order shown. */
  const eventIds = async () => (await page.getByTestId("event-id").allInnerTexts()).filter(Boolean);
  const rpcSockets = () => sockets.filter((s) => new URL(s.url()).pathname === "/v2/rpc");

  before(async () => {
    assert.ok(assetsBuilt, "the inspector is not built: run `npm run build` first");
    ui = await InspectorFixture.start({ token: TOKEN, workdir });
    page = ui.page;
    page.on("websocket", (socket) => sockets.push(socket));
  });

  after(() => ui?.close());

  it("offers the transport choice and remembers it across reloads", async () => {
    await page.goto(`${ui.proxy.url}/ui/#token=${TOKEN}`);
    const select = page.getByTestId("transport-select");
    assert.equal(await select.inputValue(), "http", "HTTP + SSE is the default");
    await select.selectOption("websocket");
    await page.reload();
    await page.getByTestId("new-session").waitFor();
    assert.equal(await page.getByTestId("transport-select").inputValue(), "websocket");
    assert.equal(await page.evaluate(() => localStorage.getItem("sandbox-agent.transport")), "websocket");
  });

  it("opens the connection on one WebSocket with a ticket, never the token, and streams a turn", async () => {
    const requestsBefore = ui.requests.length;
    await page.getByTestId("new-session").click();
    await page.getByTestId("prompt").waitFor();
    assert.equal(await page.getByTestId("connection-transport").first().innerText(), "WebSocket");
    await sendTurn("echo hello over a **WebSocket**");
    assert.equal(await agentText(), "hello over a WebSocket");
    assert.match(await lastTurnEnd(), /end_turn/);
    assert.equal(rpcSockets().length, 1, "one socket carries the connection");
    const url = new URL(rpcSockets()[0]!.url());
    assert.ok(url.searchParams.get("ticket"), url.href);
    assert.ok(!url.href.includes(TOKEN), url.href);
    // Nothing of the agent connection went over HTTP but the ticket: no POST or GET on /v2/rpc.
    const rpcHttp = ui.requests
      .slice(requestsBefore)
      .map((r) => `${r.method()} ${new URL(r.url()).pathname}`)
      .filter((r) => r.includes("/v2/rpc"));
    assert.deepEqual(rpcHttp, ["POST /v2/rpc/ticket"]);
    await ui.shot("ws-01-turn");
  });

  it("streams 300 updates in order, each event once", async () => {
    const expected = Array.from({ length: 300 }, (_, i) => `chunk ${i + 1} `).join("");
    await sendTurn("chunks 300");
    assert.equal(await agentText(), expected.trim());
    await page.getByTestId("raw-tab").click();
    const seqs = (await eventIds()).map(seqOf);
    assert.ok(seqs.length > 300, `${seqs.length} events`);
    for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i], seqs[i - 1]! + 1, `event ${i} follows`);
    await page.getByRole("button", { name: "Conversation" }).click();
  });

  it("answers a permission request from the page and completes the tool call", async () => {
    await send("write notes.md written over a WebSocket");
    const permission = page.getByTestId("permission").last();
    await permission.getByRole("button", { name: "Allow once" }).waitFor({ timeout: STEP_MS });
    const tool = page.getByTestId("tool-call").last();
    assert.match(await tool.innerText(), /pending|running/);
    assert.ok(!existsSync(path.join(workdir, "notes.md")), "the agent waits for the answer");
    await allowOnce();
    await waitFor(async () => (await agentText()) === "wrote notes.md", STEP_MS, "the agent's report");
    assert.equal(readFileSync(path.join(workdir, "notes.md"), "utf8"), "written over a WebSocket");
    await ui.shot("ws-02-permission");
  });

  it("cancels a turn", async () => {
    await send("hang");
    await page.getByTestId("cancel").click();
    await waitFor(async () => /cancelled/.test(await lastTurnEnd()), STEP_MS, "cancel");
  });

  it("resumes after the socket drops mid-stream: every chunk once, in order, no event id twice", async () => {
    const expected = Array.from({ length: 40 }, (_, i) => `chunk ${i + 1} `).join("");
    const socketsBefore = rpcSockets().length;
    await send("slow 40 50");
    await waitFor(async () => (await agentText()).includes("chunk 5 "), STEP_MS, "the stream to start");
    const refusedBefore = ui.proxy.refused;
    assert.ok(ui.proxy.cut() > 0, "the cut dropped the page's socket");
    // The network stays down until the client has tried to come back at least once.
    await waitFor(async () => ui.proxy.refused > refusedBefore, STEP_MS, "a reconnect attempt");
    ui.proxy.restore();
    await waitFor(async () => /end_turn/.test(await lastTurnEnd()), 30_000, "turn end");
    assert.equal((await agentText()).trim(), expected.trim());
    const resumed = rpcSockets().slice(socketsBefore);
    assert.ok(resumed.length >= 1, "a new socket was opened");
    for (const socket of resumed) {
      const url = new URL(socket.url());
      assert.ok(url.searchParams.get("connectionId"), url.href);
      assert.match(url.searchParams.get("lastEventId") ?? "", /^\w+\.\d+$/, url.href);
      assert.ok(!url.href.includes(TOKEN), url.href);
    }
    await page.getByRole("button", { name: "Raw JSON-RPC" }).click();
    const seqs = (await eventIds()).map(seqOf);
    for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i], seqs[i - 1]! + 1, `event ${i} follows`);
    await ui.shot("ws-03-after-drop");
    await page.getByRole("button", { name: "Conversation" }).click();
    // The connection still works after the resume.
    await sendTurn("echo still here");
    assert.equal(await agentText(), "still here");
    assert.match(await page.getByTestId("connection").first().innerText(), /connected/);
  });

  it("replaces its socket when the browser comes back online: the turn ends with every chunk once", async () => {
    // Chromium's offline emulation leaves an open WebSocket alone, as a real outage may leave it
    // half-open: only the `online` event tells the client to resume on a new socket.
    const expected = Array.from({ length: 30 }, (_, i) => `chunk ${i + 1} `).join("");
    const socketsBefore = rpcSockets().length;
    const turnsBefore = await turns();
    await send("slow 30 50");
    await waitFor(async () => (await agentText()).includes("chunk 3 "), STEP_MS, "the stream to start");
    await ui.browser.setOffline(true);
    await ui.browser.setOffline(false);
    await waitFor(async () => rpcSockets().length > socketsBefore, STEP_MS, "a new socket");
    await waitFor(async () => (await turns()) > turnsBefore, 30_000, "turn end");
    assert.match(await lastTurnEnd(), /end_turn/);
    assert.equal((await agentText()).trim(), expected.trim());
    const resumed = new URL(rpcSockets()[socketsBefore]!.url());
    assert.match(resumed.searchParams.get("lastEventId") ?? "", /^\w+\.\d+$/, resumed.href);
    await page.getByRole("button", { name: "Raw JSON-RPC" }).click();
    const seqs = (await eventIds()).map(seqOf);
    for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i], seqs[i - 1]! + 1, `event ${i} follows`);
    await page.getByRole("button", { name: "Conversation" }).click();
  });

  it("a page of another origin cannot open the socket, even with a valid ticket", async () => {
    const other = http.createServer((_req, res) => res.end("<!doctype html><title>elsewhere</title>"));
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    const elsewhere = await ui.browser.newPage();
    try {
      const response = await fetch(`${ui.proxy.url}/v2/rpc/ticket`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      assert.equal(response.status, 201);
      const { ticket } = (await response.json()) as { ticket: string };
      const target = `${ui.proxy.url.replace(/^http/, "ws")}/v2/rpc?ticket=${ticket}`;
      const open = (url: string) =>
        new Promise<string>((resolve) => {
          const socket = new WebSocket(url);
          socket.onopen = () => {
            socket.close();
            resolve("open");
          };
          socket.onclose = (event) => resolve(`closed ${event.code}`);
        });
      // localhost, not 127.0.0.1: another origin than the proxy's.
      await elsewhere.goto(`http://localhost:${(other.address() as AddressInfo).port}/`);
      assert.equal(await elsewhere.evaluate(open, target), "closed 1006");
      // The same ticket, unused by the refusal, opens the socket from the server's own origin: it
      // was the Origin that was refused.
      assert.equal(await page.evaluate(open, target), "open");
    } finally {
      await elsewhere.close();
      other.close();
    }
  });

  it("disconnect ends the connection on the server", async () => {
    const open = async () => {
      const response = await fetch(`${ui.proxy.url}/v2/connections`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      const { connections } = (await response.json()) as { connections: { id: string; state: string }[] };
      return connections.filter((c) => c.state === "open").map((c) => c.id);
    };
    assert.equal((await open()).length, 1, "the page's one connection");
    await page.getByTestId("connection").getByRole("button", { name: "disconnect" }).click();
    await waitFor(async () => (await open()).length === 0, STEP_MS, "the server to end the connection");
    assert.equal(await page.getByTestId("connection").count(), 0);
  });

  it("made no request outside the server, put the token in no URL, raised no page error", () => {
    ui.assertClean();
  });
});
