import type {
  McpServer,
  SessionConfigOption,
  SessionModeState,
  SessionNotification,
  SessionUpdate,
} from "@agentclientprotocol/sdk";

/** Everything the mock agent remembers about a session; this is also its JSON file format. */
export interface StoredSession {
  sessionId: string;
  cwd: string;
  mcpServers: McpServer[];
  title: string | null;
  updatedAt: string;
  modeId: string;
  model: string;
  verbosity: string;
  /** Every session/update sent for this session, in order (replayed by session/load). */
  history: SessionUpdate[];
}

export const MODES = [
  { id: "default", name: "Default", description: "Runs prompt scripts" },
  { id: "plan", name: "Plan", description: "Same behaviour; exists to test mode switching" },
] as const;

const MODELS = [
  { value: "mock-fast", name: "Mock fast" },
  { value: "mock-smart", name: "Mock smart" },
];
const VERBOSITIES = [
  { value: "normal", name: "Normal" },
  { value: "terse", name: "Terse" },
];

export function newSession(sessionId: string, cwd: string, mcpServers: McpServer[]): StoredSession {
  return {
    sessionId,
    cwd,
    mcpServers,
    title: null,
    updatedAt: new Date().toISOString(),
    modeId: "default",
    model: "mock-fast",
    verbosity: "normal",
    history: [],
  };
}

export function modeState(session: StoredSession): SessionModeState {
  return { currentModeId: session.modeId, availableModes: MODES.map((m) => ({ ...m })) };
}

export function configOptions(session: StoredSession): SessionConfigOption[] {
  return [
    {
      id: "mode",
      name: "Mode",
      category: "mode",
      type: "select",
      currentValue: session.modeId,
      options: MODES.map((m) => ({ value: m.id, name: m.name })),
    },
    {
      id: "model",
      name: "Model",
      category: "model",
      type: "select",
      currentValue: session.model,
      options: MODELS,
    },
    {
      id: "verbosity",
      name: "Verbosity",
      type: "select",
      currentValue: session.verbosity,
      options: VERBOSITIES,
    },
  ];
}

/** The mode/config part shared by session/new, load, resume and fork answers. */
export function sessionSetup(session: StoredSession): {
  modes: SessionModeState;
  configOptions: SessionConfigOption[];
} {
  return { modes: modeState(session), configOptions: configOptions(session) };
}

export function notification(sessionId: string, update: SessionUpdate): SessionNotification {
  return { sessionId, update };
}

/** How many updates go into one raw stdout write (see `updateLines`). */
export const UPDATE_BATCH = 256;

/**
 * The ndjson lines of `session/update` notifications, exactly as the SDK would write them. Bulk
 * output (`chunks`, load replay) is written this way because the SDK's per-message promise
 * chain caps throughput near 45k messages/s.
 */
export function updateLines(sessionId: string, updates: readonly SessionUpdate[]): string {
  let text = "";
  for (const update of updates)
    text +=
      JSON.stringify({ jsonrpc: "2.0", method: "session/update", params: notification(sessionId, update) }) +
      "\n";
  return text;
}
