/** Reported as agentInfo.version; kept in step with package.json. */
export const MOCK_AGENT_VERSION = "0.1.0";
export const MOCK_AGENT_NAME = "sandbox-agent-mock";
