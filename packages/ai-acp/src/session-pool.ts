import type { AgentLink } from "./agent-link.js";
import type { BridgeTool, McpToolBridge } from "./mcp-bridge.js";
import type { Turn } from "./turn.js";

/** An initialized agent with an open session, kept per chat thread between turns. */
export interface WarmSession {
  readonly key: string;
  readonly link: AgentLink;
  readonly sessionId: string;
  readonly cwd: string;
  readonly bridge: McpToolBridge | undefined;
  /** Tools the bridge advertises; replaced at the start of every turn. */
  tools: ReadonlyArray<BridgeTool>;
  /** The running (or paused) turn, if any. */
  turn: Turn | undefined;
  idleTimer: NodeJS.Timeout | undefined;
}

/**
 * Warm agent processes keyed by harness + sandbox + thread + model. A session
 * whose process died is dropped on lookup; idle ones are closed after
 * `keepWarmMs`.
 */
export class SessionPool {
  private readonly sessions = new Map<string, WarmSession>();

  get(key: string): WarmSession | undefined {
    const session = this.sessions.get(key);
    if (!session) return undefined;
    if (session.link.dead) {
      void this.evict(session);
      return undefined;
    }
    if (session.idleTimer) clearTimeout(session.idleTimer);
    session.idleTimer = undefined;
    return session;
  }

  add(session: WarmSession): void {
    this.sessions.set(session.key, session);
  }

  /** Marks the session idle; it is closed unless reused within `keepWarmMs`. */
  release(session: WarmSession, keepWarmMs: number): void {
    if (keepWarmMs <= 0) {
      void this.evict(session);
      return;
    }
    if (session.idleTimer) clearTimeout(session.idleTimer);
    session.idleTimer = setTimeout(() => void this.evict(session), keepWarmMs);
    session.idleTimer.unref();
  }

  async evict(session: WarmSession): Promise<void> {
    if (this.sessions.get(session.key) === session) this.sessions.delete(session.key);
    if (session.idleTimer) clearTimeout(session.idleTimer);
    session.turn?.finish();
    await Promise.all([session.link.close(), session.bridge?.close()]);
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.sessions.values()].map((session) => this.evict(session)));
  }
}
