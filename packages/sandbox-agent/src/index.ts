/**
 * sandbox-agent SDK: control a coding agent running inside a sandbox through a sandbox-agent
 * server — sessions, prompts, streamed updates, permissions — plus health, agents and files.
 */
export * from "./browser.js";
/** Embedded mode (Node only): `SandboxAgent.start()` runs a private server. */
export { SandboxAgent, type StartOptions, type EmbeddedServer } from "./embedded.js";
