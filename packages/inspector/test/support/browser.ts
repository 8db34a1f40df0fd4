import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { chromium, type BrowserContext } from "playwright-core";
import { needService, repoRoot, tempDir } from "@sandbox-agent/testkit";

/** Debian's Chromium (`apt-get install chromium`); never a browser download. */
export const chromiumPath = process.env.SANDBOX_AGENT_CHROMIUM ?? "/usr/bin/chromium";

/** Skip reason when Chromium is missing (a failure under `.ci/run`). */
export const chromiumGate = needService(
  "chromium",
  existsSync(chromiumPath)
    ? undefined
    : `${chromiumPath} not found; install it with apt-get install chromium`,
);

/** Screenshots of the browser tests, for people to look at (ignored by git). */
export const artifactsDir = path.join(repoRoot, "test-artifacts", "inspector");

/**
 * Headless Chromium with a fresh profile. Without the background-networking flags it keeps trying
 * to reach its own services, which a closed network refuses (slow, noisy).
 */
export async function launchChromium(): Promise<BrowserContext> {
  mkdirSync(artifactsDir, { recursive: true });
  return chromium.launchPersistentContext(tempDir("inspector-profile-"), {
    executablePath: chromiumPath,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
      "--disable-sync",
    ],
    viewport: { width: 1280, height: 800 },
    acceptDownloads: true,
  });
}
