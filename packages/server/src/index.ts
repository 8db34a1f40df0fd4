/** Public surface of the sandbox-agent server: start it in-process, or run the `sandbox-agent` CLI. */
export { startServer, type ServerOptions, type RunningServer } from "./server.js";
export { DEFAULT_LIMITS, type RuntimeLimits } from "./runtime/options.js";
export type { AgentSpec, AgentDefinition } from "./agents/types.js";
export { configFileSchema, loadConfigFile, type ConfigFile } from "./config.js";
export { defaultDataDir } from "./data-dir.js";
export type { Problem } from "./http/problem.js";
export { VERSION } from "./version.js";
