import { mkdirSync } from "node:fs";
import path from "node:path";
import type { BrowserContext } from "playwright-core";
import { launchChromiumContext, needChromium, repoRoot } from "@sandbox-agent/testkit";

/** Skip reason when Chromium is missing (a failure under `.ci/run`). */
export const chromiumGate = needChromium();

/** Screenshots of the browser tests, for people to look at (ignored by git). */
export const artifactsDir = path.join(repoRoot, "test-artifacts", "inspector");

export async function launchBrowser(): Promise<BrowserContext> {
  mkdirSync(artifactsDir, { recursive: true });
  return launchChromiumContext({ viewport: { width: 1280, height: 800 } });
}
