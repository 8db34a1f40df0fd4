/**
 * Test helpers shared by every package's integration tests: start the real server as a child
 * process, locate the built mock agent, read SSE streams over real HTTP, drive Debian's Chromium.
 */
export { repoRoot, serverBin, compiledServerBin, mockAgentBin } from "./paths.js";
export { startServer, stopChild, type RunningServer, type StartServerOptions } from "./server-process.js";
export { readSse, type SseEvent } from "./sse.js";
export { startProxy, type CuttableProxy, type RecordedRequest } from "./proxy.js";
export { tempDir } from "./temp.js";
export { freePort } from "./ports.js";
export { processesWith } from "./procs.js";
export { waitFor } from "./wait.js";
export { readText } from "./streams.js";
export { needService, servicesRequired } from "./services.js";
export {
  chromiumPath,
  CHROMIUM_ARGS,
  needChromium,
  launchChromium,
  launchChromiumContext,
} from "./browser.js";
export {
  postgresMissing,
  startPostgres,
  type PostgresCluster,
  type StartPostgresOptions,
} from "./postgres.js";
export { closeWorkers, serveWorker, startWorker, type Worker, type WorkerHandlers } from "./worker.js";
export { bwrapUnavailable } from "./bwrap.js";
export { mountNamespaceMissing, smallDiskWrapper } from "./small-disk.js";
