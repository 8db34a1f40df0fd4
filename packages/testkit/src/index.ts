/**
 * Test helpers shared by every package's integration tests: start the real server as a child
 * process, locate the built mock agent, and read SSE streams over real HTTP.
 */
export { repoRoot, serverBin, mockAgentBin } from "./paths.js";
export { startServer, stopChild, type RunningServer, type StartServerOptions } from "./server-process.js";
export { readSse, type SseEvent } from "./sse.js";
export { tempDir } from "./temp.js";
export { waitFor } from "./wait.js";
export { readText } from "./streams.js";
export { needService, servicesRequired } from "./services.js";
