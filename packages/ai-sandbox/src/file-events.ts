import type { CapabilityContext } from "@tanstack/ai";
import { getSandboxRuntime } from "@tanstack/ai/adapter-internals";
import { diffSnapshots, type FileDiff, type FileSnapshot } from "./diff.js";

const decode = (snapshot: FileSnapshot, path: string): string => {
  const data = snapshot.get(path)?.data;
  return data === undefined ? "" : Buffer.from(data).toString("utf8");
};

/**
 * Diffs two snapshots of `root` and reports every change to the chat engine: a `sandbox.file`
 * event (which also runs middleware `sandbox` hooks) and, when `emitDiffs`, a `sandbox.file.diff`
 * chunk per file. Call from inside `chatStream` so the engine streams them with the turn.
 * Returns the diffs; without a chat engine context (direct adapter use) it only computes them.
 */
export function reportFileChanges(
  ctx: CapabilityContext | undefined,
  root: string,
  before: FileSnapshot,
  after: FileSnapshot,
  options: { emitDiffs?: boolean } = {},
): FileDiff[] {
  const diffs = diffSnapshots(before, after);
  const runtime = ctx === undefined ? undefined : getSandboxRuntime(ctx, { optional: true });
  if (runtime === undefined) return diffs;
  for (const change of diffs) {
    const path = `${root.replace(/\/+$/, "")}/${change.path}`;
    runtime.emit({
      type: change.type,
      path,
      timestamp: Date.now(),
      before: () => Promise.resolve(decode(before, change.path)),
      after: () => Promise.resolve(decode(after, change.path)),
      diff: () => Promise.resolve(change.diff),
    });
    if (options.emitDiffs === true) runtime.emitFileDiff({ path, diff: change.diff });
  }
  return diffs;
}
