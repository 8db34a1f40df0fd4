import type {
  PermissionOption,
  RequestPermissionRequest,
  RequestPermissionResponse,
} from "@agentclientprotocol/sdk";
import type { PermissionMode } from "./config.js";

export type PermissionOutcome = RequestPermissionResponse["outcome"];

/** Tool kinds that `acceptEdits` approves: they only change files in the workspace. */
const EDIT_KINDS: ReadonlySet<string> = new Set(["edit", "delete", "move"]);

/**
 * The decision the mode makes on its own, or `"ask"` when a human must decide.
 * Decisions key on the ACP tool `kind` only: a title is free text the agent
 * chooses and must never unlock an approval.
 */
export function decideByMode(mode: PermissionMode, kind: string | undefined): "allow" | "ask" {
  if (mode === "bypassPermissions") return "allow";
  if (mode === "acceptEdits" && kind !== undefined && EDIT_KINDS.has(kind)) return "allow";
  return "ask";
}

export function allowOutcome(request: RequestPermissionRequest): PermissionOutcome {
  return select(request.options, ["allow_once", "allow_always"]);
}

export function rejectOutcome(request: RequestPermissionRequest): PermissionOutcome {
  return select(request.options, ["reject_once", "reject_always"]);
}

/**
 * Maps a client's yes/no onto the agent's options. `always` variants are only
 * used when the agent offers no `once` option, so one click never grants more
 * than the client saw.
 */
export function outcomeForApproval(request: RequestPermissionRequest, approved: boolean): PermissionOutcome {
  return approved ? allowOutcome(request) : rejectOutcome(request);
}

export const CANCELLED: PermissionOutcome = { outcome: "cancelled" };

function select(
  options: ReadonlyArray<PermissionOption>,
  kinds: ReadonlyArray<PermissionOption["kind"]>,
): PermissionOutcome {
  for (const kind of kinds) {
    const option = options.find((candidate) => candidate.kind === kind);
    if (option) return { outcome: "selected", optionId: option.optionId };
  }
  return CANCELLED;
}
