import { agent, type AgentApp, type LoadSessionRequest } from "@agentclientprotocol/sdk";
import * as life from "./handlers/lifecycle.js";
import { cancel, prompt } from "./handlers/prompt.js";
import type { AgentState } from "./state.js";

function parseForkParams(params: unknown): LoadSessionRequest {
  const p = params as Partial<LoadSessionRequest> | null;
  if (!p || typeof p.sessionId !== "string" || typeof p.cwd !== "string")
    throw new TypeError("session/fork needs sessionId and cwd");
  return { sessionId: p.sessionId, cwd: p.cwd, mcpServers: Array.isArray(p.mcpServers) ? p.mcpServers : [] };
}

/** The mock agent's ACP app: every handler delegates to a function of `handlers/`. */
export function mockAgentApp(state: AgentState): AgentApp {
  return agent({ name: "sandbox-agent-mock" })
    .onRequest("initialize", ({ params }) => life.initialize(state, params))
    .onRequest("authenticate", ({ params }) => life.authenticate(state, params))
    .onRequest("session/new", ({ params }) => life.createSession(state, params))
    .onRequest("session/load", ({ params }) => life.loadSession(state, params))
    .onRequest("session/resume", ({ params }) => life.resumeSession(state, params))
    .onRequest("session/list", ({ params }) => life.listSessions(state, params))
    .onRequest("session/close", ({ params }) => life.closeSession(state, params.sessionId))
    .onRequest("session/set_mode", ({ params, client }) =>
      life.setMode(state, client, params.sessionId, params.modeId),
    )
    .onRequest("session/set_config_option", ({ params, client }) =>
      life.setConfigOption(state, client, params),
    )
    .onRequest("session/fork", parseForkParams, ({ params }) => life.forkSession(state, params))
    .onRequest("session/prompt", ({ params, client }) => prompt(state, client, params))
    .onNotification("session/cancel", ({ params }) => cancel(state, params.sessionId));
}
