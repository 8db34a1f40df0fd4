import { readdirSync, readFileSync } from "node:fs";
import type { DescriptorLimit, RuntimeLimits } from "./options.js";

/** Descriptors kept free for the server itself: log file, filesystem API, npm installs, DNS, the orphan guard. */
const RESERVE = 64;
/** What one agent costs the server: its stdin, stdout and stderr pipes. */
export const DESCRIPTORS_PER_AGENT = 3;
/** Used when the limit cannot be read (not Linux): Linux's usual soft limit. */
const FALLBACK_LIMIT = 1024;

export interface DescriptorBudget {
  /** The soft `RLIMIT_NOFILE` (Node raises it to the hard limit at start), or undefined if unknown. */
  limit: number | undefined;
  /** Descriptors open when the budget was taken. */
  inUse: number;
  /** Defaults for the limits that spend descriptors. */
  defaults: Pick<RuntimeLimits, DescriptorLimit>;
}

/**
 * Splits the descriptors left after start into agents and sockets, so that running out of them
 * shows up as a 503 at a cap instead of a failing `spawn` or `accept`. Half of the budget goes to
 * agents' pipes (an ACP connection also holds a socket or two: its SSE stream and POSTs), the
 * other half to sockets, less a sixteenth kept for the sockets that are answered 503 at the cap.
 * Reading `/proc/self/limits` and listing `/proc/self/fd` once at start costs well under a millisecond.
 */
export function descriptorBudget(): DescriptorBudget {
  const limit = readNofile();
  const inUse = countOpen();
  const budget = Math.max(0, (limit ?? FALLBACK_LIMIT) - inUse - RESERVE);
  const maxConnections = Math.max(1, Math.floor(budget / (2 * DESCRIPTORS_PER_AGENT)));
  const maxSockets = Math.max(1, Math.floor(((budget - DESCRIPTORS_PER_AGENT * maxConnections) * 15) / 16));
  return { limit, inUse, defaults: { maxConnections, maxSockets } };
}

/** Descriptors the configured limits may use at most, to compare with the budget. */
export function descriptorsNeeded(limits: Pick<RuntimeLimits, DescriptorLimit>): number {
  return DESCRIPTORS_PER_AGENT * limits.maxConnections + Math.ceil((limits.maxSockets * 16) / 15) + RESERVE;
}

function readNofile(): number | undefined {
  try {
    const line = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync("/proc/self/limits", "utf8"));
    if (!line || line[1] === "unlimited") return undefined;
    return Number(line[1]);
  } catch {
    return undefined;
  }
}

function countOpen(): number {
  try {
    return readdirSync("/proc/self/fd").length;
  } catch {
    return 32;
  }
}
