import { existsSync } from "node:fs";
import type { Browser, BrowserContext, LaunchOptions } from "playwright-core";
import { needService } from "./services.js";
import { tempDir } from "./temp.js";

/** Debian's Chromium (`apt-get install chromium`), or `$SANDBOX_AGENT_CHROMIUM`; never a browser download. */
export const chromiumPath = process.env.SANDBOX_AGENT_CHROMIUM ?? "/usr/bin/chromium";

/**
 * Headless, no sandbox (tests run as root), and none of Chromium's own background traffic: on a
 * closed network its retries make it slow and noisy.
 */
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--no-first-run",
  "--disable-sync",
];

/** Skip gate for browser tests (a failure under `.ci/run`, which installs Chromium). */
export function needChromium(): string | false {
  return needService(
    "chromium",
    existsSync(chromiumPath)
      ? undefined
      : `${chromiumPath} not found; install it with apt-get install chromium`,
  );
}

function launchOptions(): LaunchOptions {
  return { executablePath: chromiumPath, headless: true, args: CHROMIUM_ARGS };
}

/** Chromium with a fresh profile (its own user-data dir), one context; playwright-core loads on first use. */
export async function launchChromiumContext(
  options: { viewport?: { width: number; height: number } } = {},
): Promise<BrowserContext> {
  const { chromium } = await import("playwright-core");
  return chromium.launchPersistentContext(tempDir("chromium-profile-"), {
    ...launchOptions(),
    acceptDownloads: true,
    ...(options.viewport ? { viewport: options.viewport } : {}),
  });
}

/** Chromium for many fresh contexts (each context starts with an empty cache). */
export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import("playwright-core");
  return chromium.launch(launchOptions());
}
