import { randomUUID } from "node:crypto";
import {
  PROTOCOL_VERSION,
  RequestError,
  type AgentContext,
  type AuthenticateRequest,
  type InitializeRequest,
  type InitializeResponse,
  type ListSessionsRequest,
  type ListSessionsResponse,
  type LoadSessionRequest,
  type LoadSessionResponse,
  type NewSessionRequest,
  type NewSessionResponse,
  type SetSessionConfigOptionRequest,
  type SetSessionConfigOptionResponse,
} from "@agentclientprotocol/sdk";
import { writeStdout } from "../io.js";
import {
  configOptions,
  MODES,
  newSession,
  notification,
  sessionSetup,
  UPDATE_BATCH,
  updateLines,
  type StoredSession,
} from "../session.js";
import type { AgentState } from "../state.js";
import { MOCK_AGENT_NAME, MOCK_AGENT_VERSION } from "../version.js";

/** load, resume and fork all name a stored session plus the cwd/MCP servers to use now. */
type AttachRequest = Pick<LoadSessionRequest, "sessionId" | "cwd"> & {
  mcpServers?: LoadSessionRequest["mcpServers"];
};

export const AUTH_METHOD_ID = "mock-api-key";

export function initialize(state: AgentState, params: InitializeRequest): Promise<InitializeResponse> {
  if (state.flags.hangInitialize) return new Promise(() => {});
  if (state.flags.failInitialize)
    throw RequestError.invalidParams(undefined, "mock-agent started with --fail-initialize");
  state.clientCapabilities = params.clientCapabilities;
  const sessionCapabilities = { list: {}, resume: {}, close: {}, fork: {} };
  return Promise.resolve({
    protocolVersion: state.flags.protocolVersion ?? PROTOCOL_VERSION,
    agentInfo: { name: MOCK_AGENT_NAME, title: "Sandbox Agent mock", version: MOCK_AGENT_VERSION },
    agentCapabilities: {
      loadSession: true,
      promptCapabilities: { image: true, audio: false, embeddedContext: true },
      mcpCapabilities: { http: true, sse: false },
      sessionCapabilities,
    },
    authMethods: [{ id: AUTH_METHOD_ID, name: "Mock API key", description: "MOCK_API_KEY env var" }],
  });
}

export function authenticate(state: AgentState, params: AuthenticateRequest): Record<string, never> {
  if (params.methodId !== AUTH_METHOD_ID)
    throw RequestError.invalidParams({ methodId: params.methodId }, `unknown auth method ${params.methodId}`);
  if (!process.env["MOCK_API_KEY"]) throw RequestError.authRequired(undefined, "MOCK_API_KEY is not set");
  state.authenticated = true;
  return {};
}

function requireAuth(state: AgentState): void {
  if (process.env["MOCK_REQUIRE_AUTH"] === "1" && !state.authenticated)
    throw RequestError.authRequired(undefined, "authenticate with mock-api-key first");
}

/** The session, live or from the state dir, or -32002. */
export function requireSession(state: AgentState, sessionId: string): StoredSession {
  const session = state.store.get(sessionId);
  if (!session) throw RequestError.resourceNotFound(sessionId);
  return session;
}

function requestedSessionId(meta: Record<string, unknown> | null | undefined): string {
  const mock = meta?.["mock"];
  const id =
    typeof mock === "object" && mock !== null ? (mock as Record<string, unknown>)["sessionId"] : undefined;
  return typeof id === "string" && id ? id : randomUUID();
}

export function createSession(state: AgentState, params: NewSessionRequest): NewSessionResponse {
  requireAuth(state);
  const session = newSession(requestedSessionId(params._meta), params.cwd, params.mcpServers ?? []);
  state.store.put(session);
  return { sessionId: session.sessionId, ...sessionSetup(session) };
}

/** Attaches a stored session to this process; the cwd and MCP servers of the request win. */
function attach(state: AgentState, params: AttachRequest): StoredSession {
  requireAuth(state);
  const session = requireSession(state, params.sessionId);
  session.cwd = params.cwd;
  session.mcpServers = params.mcpServers ?? session.mcpServers;
  state.store.put(session);
  return session;
}

export async function loadSession(
  state: AgentState,
  params: LoadSessionRequest,
): Promise<LoadSessionResponse> {
  const session = attach(state, params);
  for (let i = 0; i < session.history.length; i += UPDATE_BATCH) {
    await writeStdout(updateLines(session.sessionId, session.history.slice(i, i + UPDATE_BATCH)));
  }
  return sessionSetup(session);
}

export function resumeSession(state: AgentState, params: AttachRequest): LoadSessionResponse {
  return sessionSetup(attach(state, params));
}

export function forkSession(state: AgentState, params: AttachRequest): NewSessionResponse {
  const source = attach(state, params);
  const fork: StoredSession = {
    ...structuredClone(source),
    sessionId: randomUUID(),
    updatedAt: new Date().toISOString(),
  };
  state.store.put(fork);
  return { sessionId: fork.sessionId, ...sessionSetup(fork) };
}

export function listSessions(state: AgentState, params: ListSessionsRequest): ListSessionsResponse {
  const sessions = state.store
    .list()
    .filter((s) => !params.cwd || s.cwd === params.cwd)
    .map((s) => ({ sessionId: s.sessionId, cwd: s.cwd, title: s.title, updatedAt: s.updatedAt }));
  return { sessions };
}

export function closeSession(state: AgentState, sessionId: string): Record<string, never> {
  requireSession(state, sessionId);
  state.turns.get(sessionId)?.abort();
  state.store.release(sessionId);
  return {};
}

async function applyMode(client: AgentContext, session: StoredSession, modeId: string): Promise<void> {
  if (!MODES.some((m) => m.id === modeId))
    throw RequestError.invalidParams({ modeId }, `unknown mode ${modeId}`);
  session.modeId = modeId;
  await client.notify(
    "session/update",
    notification(session.sessionId, { sessionUpdate: "current_mode_update", currentModeId: modeId }),
  );
}

export async function setMode(
  state: AgentState,
  client: AgentContext,
  sessionId: string,
  modeId: string,
): Promise<Record<string, never>> {
  const session = requireSession(state, sessionId);
  await applyMode(client, session, modeId);
  await client.notify(
    "session/update",
    notification(sessionId, { sessionUpdate: "config_option_update", configOptions: configOptions(session) }),
  );
  state.store.save(session);
  return {};
}

export async function setConfigOption(
  state: AgentState,
  client: AgentContext,
  params: SetSessionConfigOptionRequest,
): Promise<SetSessionConfigOptionResponse> {
  const session = requireSession(state, params.sessionId);
  const option = configOptions(session).find((o) => o.id === params.configId);
  const value = params.value;
  if (!option || option.type !== "select")
    throw RequestError.invalidParams(
      { configId: params.configId },
      `unknown config option ${params.configId}`,
    );
  const values = option.options.flatMap((o) => ("group" in o ? o.options : [o])).map((o) => o.value);
  if (typeof value !== "string" || !values.includes(value))
    throw RequestError.invalidParams({ value }, `invalid value for ${option.id}: ${String(value)}`);
  if (option.id === "mode") await applyMode(client, session, value);
  else if (option.id === "model") session.model = value;
  else session.verbosity = value;
  state.store.save(session);
  return { configOptions: configOptions(session) };
}
