import type { Logger } from "../log.js";
import { installAgent, type InstallOptions, type InstallResult } from "./install.js";
import type { AgentDefinition } from "./types.js";

/**
 * Follows npm's `--loglevel=http` output (`npm http fetch GET 200 <url> 153ms (cache miss)`):
 * how many requests so far and which package the last one was for.
 */
export class NpmProgress {
  fetches = 0;
  lastPackage: string | undefined;

  take(line: string): void {
    const fetch = /^npm http fetch \w+ \d+ (\S+)/.exec(line);
    if (!fetch) return;
    this.fetches++;
    this.lastPackage = packageOf(fetch[1]!) ?? this.lastPackage;
  }
}

/** The package a registry URL is about: `/@scope%2fname`, `/name/-/name-1.2.3.tgz` → its name. */
function packageOf(url: string): string | undefined {
  let pathname: string;
  try {
    pathname = decodeURIComponent(new URL(url).pathname);
  } catch {
    return undefined;
  }
  const parts = pathname.split("/").filter(Boolean);
  const name = parts[0]?.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
  return name || undefined;
}

/** `installAgent` with its steps in the server log: start and end at info, each npm line at debug. */
export async function installLogged(
  agent: AgentDefinition,
  logger: Logger,
  options: InstallOptions = {},
): Promise<InstallResult> {
  const progress = new NpmProgress();
  logger.info("installing agent", { agent: agent.id, version: options.version });
  try {
    const result = await installAgent(agent, {
      ...options,
      onProgress: (line) => {
        progress.take(line);
        logger.debug("install step", { agent: agent.id, line });
        options.onProgress?.(line);
      },
    });
    logger.info(result.alreadyInstalled ? "agent already installed" : "agent installed", {
      agent: agent.id,
      version: result.version,
      durationMs: result.durationMs,
      requests: progress.fetches,
    });
    return result;
  } catch (error) {
    logger.warn("agent install failed", { agent: agent.id, error: (error as Error).message });
    throw error;
  }
}
