import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { describe, it } from "node:test";
import { readFileSync } from "node:fs";
import { processesWith, waitFor } from "@sandbox-agent/testkit";
import { createLogger } from "../src/log.js";
import { OrphanGuard } from "../src/runtime/orphan-guard.js";
import { isRunning } from "./support/procs.js";

/** This test process' orphan-guard watchers (other servers on the machine have their own). */
function ourWatchers(): number[] {
  return processesWith("orphan-guard").filter((pid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === process.pid;
    } catch {
      return false;
    }
  });
}

function recordingLogger(): { lines: string[]; logger: ReturnType<typeof createLogger> } {
  const lines: string[] = [];
  return { lines, logger: createLogger("debug", (line) => void lines.push(line)) };
}

describe("orphan guard", () => {
  it("without a shell it degrades to a warning, once, and never throws", async () => {
    const { lines, logger } = recordingLogger();
    const guard = new OrphanGuard(100, logger, "/nonexistent/sh");
    guard.add(process.pid);
    await waitFor(() => lines.length > 0, 5000, "the warning");
    guard.add(process.pid + 1);
    guard.remove(process.pid);
    guard.close();
    assert.equal(lines.filter((l) => /no \/nonexistent\/sh for the orphan guard/.test(l)).length, 1);
  });

  it("a clean close kills nothing; the groups it was told about are left alone", async () => {
    const { logger } = recordingLogger();
    const guard = new OrphanGuard(100, logger);
    const group = spawn("sleep", ["30"], { detached: true, stdio: "ignore" });
    try {
      guard.add(group.pid!);
      await waitFor(() => ourWatchers().length === 1, 5000, "the watcher");
      guard.close();
      // The watcher exits on `done` without signalling; the group must outlive it.
      await waitFor(() => ourWatchers().length === 0, 5000, "the watcher gone");
      assert.ok(isRunning(group.pid!));
    } finally {
      group.kill("SIGKILL");
    }
  });
});
