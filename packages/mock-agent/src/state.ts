import type { ClientCapabilities } from "@agentclientprotocol/sdk";
import type { MockAgentFlags } from "./flags.js";
import type { SessionStore } from "./store.js";

/** Per-process state shared by all handlers (one process serves one ACP connection). */
export interface AgentState {
  readonly flags: MockAgentFlags;
  readonly store: SessionStore;
  authenticated: boolean;
  clientCapabilities: ClientCapabilities | undefined;
  /** Abort controllers of running prompt turns, by session id. */
  readonly turns: Map<string, AbortController>;
}
