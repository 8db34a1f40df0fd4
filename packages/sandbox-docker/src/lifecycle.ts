import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type Docker from "dockerode";
import { onProcessExit } from "@sandbox-agent/ai-sandbox";

/** What happens to a container when its host process exits. */
export interface ExitJob {
  connection: Docker.DockerOptions;
  id: string;
  /** Ephemeral sandboxes are removed; keyed ones are stopped, to be resumed later. */
  action: "remove" | "stop";
}

const live = new Map<string, ExitJob>();
let hooked = false;

/**
 * One exit hook for every container of this process: it starts a single detached helper that
 * removes or stops them all (an exit handler cannot wait for the engine itself).
 */
export function trackContainer(job: ExitJob): () => void {
  if (!hooked) {
    hooked = true;
    onProcessExit(() => {
      if (live.size === 0) return;
      const helper = fileURLToPath(new URL("./exit-cleanup.js", import.meta.url));
      const child = spawn(process.execPath, [helper, JSON.stringify([...live.values()])], {
        detached: true,
        stdio: "ignore",
      });
      child.unref();
      live.clear();
    });
  }
  live.set(job.id, job);
  return () => live.delete(job.id);
}
