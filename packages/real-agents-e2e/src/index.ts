export {
  AgentClient,
  messageText,
  type OpenOptions,
  type PermissionPolicy,
  type TurnResult,
} from "./agent-client.js";
export { e2eDataDir, listAgents, type ListedAgent } from "./data-dir.js";
export { fakeModelScript, startFakeModel, type FakeModel } from "./fake-model.js";
export { claude, codex, gemini, opencode, pi, type AgentProfile, type AgentSetup } from "./profiles.js";
export { realAgentSuite, skipReason } from "./suite.js";
export { sdkSuite } from "./sdk-suite.js";
