export type {
  ProvisionedGitSkill,
  ProvisionedWorkspace,
  ResolvedMcpServer,
  SandboxAcpStream,
  SandboxChannel,
  SandboxFileEntry,
  SandboxFiles,
  SandboxInstance,
  SandboxProcess,
  SpawnOptions,
} from "./types.js";
export { SandboxCapability, getSandbox, provideSandbox } from "./types.js";
export type {
  PersistentSandboxProvider,
  ProviderCreateRequest,
  ProviderInstance,
  SandboxProvider,
} from "./provider.js";
export {
  defineSandbox,
  withSandbox,
  type SandboxDefinition,
  type SandboxMiddleware,
  type SandboxOptions,
} from "./sandbox.js";
export { localProcessSandbox, type LocalProcessSandboxOptions } from "./local-process.js";
export type { BwrapOptions } from "./bwrap.js";
export {
  defineWorkspace,
  gitRepository,
  githubRepo,
  localDirectory,
  type Workspace,
  type WorkspaceOptions,
  type WorkspaceSetup,
  type WorkspaceSource,
} from "./workspace.js";
export { createSecrets, Secrets, type SecretRef } from "./secrets.js";
export {
  agentSkill,
  fileSkill,
  gitSkill,
  mcpSkill,
  placeSkills,
  type AgentSkill,
  type FileSkill,
  type GitSkill,
  type McpSkill,
  type McpSkillConfig,
  type WorkspaceSkill,
} from "./skills.js";
export {
  diffSnapshots,
  snapshotFiles,
  type FileDiff,
  type FileSnapshot,
  type SnapshotEntry,
  type SnapshotOptions,
} from "./diff.js";
export { reportFileChanges } from "./file-events.js";
export { sandboxAgentSandbox, type SandboxAgentSandboxOptions } from "./sandbox-agent.js";
export {
  CapacityTimeoutError,
  SandboxBusyError,
  createFleet,
  type Fleet,
  type FleetIdlePolicy,
  type FleetOptions,
  type FleetSandbox,
  type GetOrCreateOptions,
  type ReapResult,
} from "./fleet.js";

// ---- For provider packages (e.g. @sandbox-agent/sandbox-docker) ----
export { linkAgentServer, type AgentServerLink, type AgentServerOptions } from "./agent-server.js";
export { hostUrl, sameNetwork } from "./channel.js";
export { onProcessExit } from "./exit-hook.js";
export { TailBuffer } from "./process.js";
export { shellQuote } from "./shell.js";
