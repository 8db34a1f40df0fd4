/**
 * A harness with a `store` records each chat thread's agent session there, so that a replica of the
 * application that did not run the thread's earlier turns (or this one after a restart) finds the
 * session again and reopens it (`session/load` or `session/resume`) instead of starting over.
 */
import { SessionExistsError, type SessionStore } from "@sandbox-agent/session-store";

export interface ThreadSession {
  store: SessionStore;
  /** The chat thread: the record's id. */
  threadId: string;
  /** The harness name: the record's agent. */
  harness: string;
  /** The sandbox the agent runs in: the record's sandbox key. */
  sandboxKey: string;
}

/** The agent session recorded for the thread, if this harness made it in this sandbox. */
export async function storedSession(thread: ThreadSession): Promise<string | undefined> {
  const record = await thread.store.sessions.get(thread.threadId);
  if (record?.agent !== thread.harness || record.sandboxKey !== thread.sandboxKey) return undefined;
  return record.agentSessionId ?? undefined;
}

/** Records the thread's (new or reopened) agent session. */
export async function recordSession(
  thread: ThreadSession,
  agentSessionId: string,
  model: string,
): Promise<void> {
  const { store, threadId, harness, sandboxKey } = thread;
  const fields = { sandboxKey, agentSessionId, metadata: { model } };
  try {
    await store.sessions.create({ id: threadId, agent: harness, ...fields });
  } catch (error) {
    // Recorded before (an earlier turn, another replica): point it at this session.
    if (!(error instanceof SessionExistsError)) throw error;
    await store.sessions.update(threadId, fields);
  }
}
