// Run detached by the exit hook (`node exit-cleanup.js JOBS`): removes or stops the containers a
// host process leaves behind. A separate process because an exit handler cannot wait for the
// engine's answers; detached so that the host exits at once and a signal to its group spares it.
import Docker from "dockerode";
import type { ExitJob } from "./lifecycle.js";

const jobs = JSON.parse(process.argv[2] ?? "[]") as ExitJob[];
await Promise.all(
  jobs.map(async (job) => {
    const container = new Docker(job.connection).getContainer(job.id);
    try {
      if (job.action === "remove") await container.remove({ force: true, v: true });
      else await container.stop({ t: 2 });
    } catch {
      // Already gone or already stopped.
    }
  }),
);
