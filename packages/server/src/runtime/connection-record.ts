import type { AgentDefinition } from "../agents/types.js";
import { isObject, type JsonRpcId, type JsonRpcMessage } from "../protocol.js";

/** How an agent process is started: its definition, environment and working directory. */
export interface AgentLaunch {
  agent: AgentDefinition;
  env: Record<string, string>;
  cwd?: string;
}

/** The ACP method that re-attaches a session to a new agent process, when the agent has one. */
export type ReattachMethod = "session/resume" | "session/load";

/**
 * What the index of a durable store keeps about a connection, so that a restarted server can
 * bring it back: never a secret (the initialize request is kept without its `env` values).
 */
export interface ConnectionRecord {
  agentId: string;
  epoch: string;
  createdAt: string;
  /** The client's initialize request, `_meta["sandboxagent.dev"].env` removed; sent again to a restarted agent. */
  initialize: JsonRpcMessage;
  protocolVersion: number | undefined;
  /** How the agent's sessions are re-attached to a restarted agent; undefined when they cannot be. */
  reattach: ReattachMethod | undefined;
  /** Open sessions and the cwd each was started in (`session/load` needs it). */
  sessions: Record<string, { cwd: string | undefined }>;
  /**
   * Client requests waiting for the agent, as older servers kept them: after a restart each gets an
   * error, never silence. Current servers keep them in each connection's request journal instead
   * (`store/request-journal.ts`), one line per change, and leave this out.
   */
  pending?: JsonRpcId[];
  /**
   * Agent requests the client has not answered (a permission asked, a file to read…): after a
   * restart the agent that asked is gone, so each is withdrawn with `$/cancel_request`. Absent in
   * records of older servers.
   */
  agentPending?: Array<{ id: JsonRpcId; method: string; sessionId: string | undefined }>;
  /** Set once the connection ended: the reason, message and data told to the client. */
  ending: { reason: string; message: string; data: Record<string, unknown> } | undefined;
}

/**
 * The method a restarted agent re-attaches sessions with, from its initialize result:
 * `session/load` (stable ACP; the history it replays is dropped by the server) when advertised,
 * else the unstable `session/resume`.
 */
export function reattachMethodOf(result: unknown): ReattachMethod | undefined {
  const caps = isObject(result) && isObject(result.agentCapabilities) ? result.agentCapabilities : {};
  if (caps.loadSession === true) return "session/load";
  const sessionCaps = isObject(caps.sessionCapabilities) ? caps.sessionCapabilities : {};
  return isObject(sessionCaps.resume) ? "session/resume" : undefined;
}
