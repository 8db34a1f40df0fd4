import assert from "node:assert/strict";
import path from "node:path";
import type { BrowserContext, Page, Request } from "playwright-core";
import { startServer, type RunningServer } from "@sandbox-agent/testkit";
import { artifactsDir, launchBrowser } from "./browser.js";
import { TcpProxy } from "./tcp-proxy.js";

/**
 * The real server (mock agent, a token) behind a proxy the test can cut, and Chromium with one
 * page, recording what the pages do: every HTTP request and WebSocket URL, uncaught errors, and
 * Content-Security-Policy violations (Chromium reports those on the console).
 */
export class InspectorFixture {
  readonly requests: Request[] = [];
  readonly webSockets: string[] = [];
  readonly pageErrors: string[] = [];
  readonly cspViolations: string[] = [];

  private constructor(
    readonly token: string,
    readonly server: RunningServer,
    readonly proxy: TcpProxy,
    readonly browser: BrowserContext,
    readonly page: Page,
  ) {
    this.watch(page);
  }

  static async start(options: {
    token: string;
    workdir: string;
    env?: Record<string, string>;
  }): Promise<InspectorFixture> {
    const server = await startServer({
      token: options.token,
      args: ["--workdir", options.workdir],
      ...(options.env ? { env: options.env } : {}),
    });
    const proxy = await TcpProxy.start(server.port);
    const browser = await launchBrowser();
    const page = browser.pages()[0] ?? (await browser.newPage());
    return new InspectorFixture(options.token, server, proxy, browser, page);
  }

  /** Another tab of the same browser, recorded like the first. */
  async newPage(): Promise<Page> {
    const page = await this.browser.newPage();
    this.watch(page);
    return page;
  }

  /** Saves a screenshot of `page` (default: the first) in the artifacts directory. */
  async shot(name: string, page: Page = this.page): Promise<string> {
    const file = path.join(artifactsDir, `${name}.png`);
    await page.screenshot({ path: file });
    return file;
  }

  /**
   * Nothing left the server's origin, no URL (HTTP or WebSocket) carried the token, no page raised
   * an error and the Content-Security-Policy refused nothing.
   */
  assertClean(): void {
    const origin = this.proxy.url;
    const wsOrigin = origin.replace(/^http/, "ws");
    for (const request of this.requests) assert.ok(request.url().startsWith(origin), request.url());
    for (const url of this.webSockets) assert.ok(url.startsWith(wsOrigin), url);
    for (const url of [...this.requests.map((r) => r.url()), ...this.webSockets])
      assert.ok(!url.includes(this.token), url);
    assert.deepEqual(this.pageErrors, []);
    assert.deepEqual(this.cspViolations, []);
  }

  async close(): Promise<void> {
    await this.browser.close();
    await this.proxy.close();
    await this.server.stop();
    console.log(`inspector screenshots: ${artifactsDir}`);
  }

  private watch(page: Page): void {
    page.on("request", (request) => this.requests.push(request));
    page.on("websocket", (socket) => this.webSockets.push(socket.url()));
    page.on("pageerror", (error) => this.pageErrors.push(error.message));
    page.on("console", (message) => {
      if (/Content Security Policy/i.test(message.text())) this.cspViolations.push(message.text());
    });
  }
}
