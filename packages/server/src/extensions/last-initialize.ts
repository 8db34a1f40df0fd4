import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { ConnectionExtension } from "../runtime/extension.js";

/** What an agent said about itself in its last `initialize` result. */
export interface AgentAdvertisement {
  at: string;
  protocolVersion: unknown;
  agentCapabilities: unknown;
  authMethods: unknown;
  agentInfo: unknown;
}

function fileOf(dataDir: string, agentId: string): string {
  return path.join(dataDir, "agents", agentId, "last-initialize.json");
}

/** Kept on disk so `GET /v2/agents` shows it across server restarts and to every process sharing the data dir. */
export function lastAdvertisement(dataDir: string, agentId: string): AgentAdvertisement | null {
  try {
    return JSON.parse(readFileSync(fileOf(dataDir, agentId), "utf8")) as AgentAdvertisement;
  } catch {
    return null;
  }
}

/** A connection extension that records each agent's `initialize` result (before other extensions adjust it). */
export function advertisementRecorder(dataDir: string): ConnectionExtension {
  return {
    initializeResult(result, conn) {
      const advertisement: AgentAdvertisement = {
        at: new Date().toISOString(),
        protocolVersion: result.protocolVersion ?? null,
        agentCapabilities: result.agentCapabilities ?? null,
        authMethods: result.authMethods ?? null,
        agentInfo: result.agentInfo ?? null,
      };
      const file = fileOf(dataDir, conn.agentId);
      // Best effort: a full disk or an answer too deep to serialize must not fail the initialize.
      try {
        mkdirSync(path.dirname(file), { recursive: true });
        writeFileSync(file, JSON.stringify(advertisement, null, 2) + "\n");
      } catch {
        // `GET /v2/agents` keeps showing the previous advertisement.
      }
    },
  };
}
