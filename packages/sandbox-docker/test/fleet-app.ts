/**
 * One application replica for the fleet end-to-end test, in a process of its own: a fleet of
 * container sandboxes on the shared PostgreSQL store (`DATABASE_URL`), the SDK bound to the store
 * for the chat it drives, and a follower of any chat through the store's mirror.
 */
import { createFleet, type Fleet } from "@sandbox-agent/ai-sandbox";
import { postgresSessionStore, type PostgresSessionStore } from "@sandbox-agent/session-store-postgres";
import { serveWorker } from "@sandbox-agent/testkit";
import { SandboxAgentClient, followSession, type SandboxAgentEvent } from "sandbox-agent";
import { dockerSandbox, type DockerSandboxInstance, type DockerSandboxOptions } from "../src/index.js";

interface OpenParams {
  name: string;
  options: DockerSandboxOptions;
  maxLive?: number;
  idleTtlMs?: number;
}

let store: PostgresSessionStore | undefined;
let fleet: Fleet | undefined;
let client: SandboxAgentClient | undefined;

const opened = (): { store: PostgresSessionStore; fleet: Fleet } => {
  if (!store || !fleet) throw new Error("call open first");
  return { store, fleet };
};

/** The container sandbox of `key` (created, resumed or reattached) and how it came. */
async function sandbox(key: string): Promise<{ instance: DockerSandboxInstance; outcome: string }> {
  const { instance, outcome } = await opened().fleet.getOrCreate(key);
  return { instance: instance as DockerSandboxInstance, outcome };
}

const textOf = (event: SandboxAgentEvent): string | undefined =>
  event.type === "update" &&
  event.update.sessionUpdate === "agent_message_chunk" &&
  event.update.content.type === "text"
    ? event.update.content.text
    : undefined;

const worker = serveWorker({
  open: async (params: OpenParams) => {
    store = await postgresSessionStore({ applicationName: params.name });
    fleet = createFleet({
      provider: dockerSandbox({ ...params.options, persistent: true }),
      store,
      owner: params.name,
      ...(params.maxLive !== undefined ? { maxLive: params.maxLive } : {}),
      // The test calls reap() itself.
      ...(params.idleTtlMs !== undefined ? { idle: { ttlMs: params.idleTtlMs, intervalMs: 3_600_000 } } : {}),
    });
  },
  /** Creates (or reattaches to) the chat's sandbox, records the session, starts a turn without waiting for it. */
  startChat: async (params: { key: string; sessionId: string; prompt: string }) => {
    const { instance, outcome } = await sandbox(params.key);
    client = new SandboxAgentClient({
      baseUrl: instance.endpoint!,
      token: instance.server.token,
      agent: "mock",
      store: opened().store,
      sessionId: params.sessionId,
      sandboxKey: params.key,
      autoConnect: false,
    });
    await client.connect();
    const { sessionId } = await client.newSession({ cwd: "/workspace" });
    void client.prompt({ sessionId, prompt: params.prompt }).then(
      (result) => worker.push("turnDone", result.stopReason),
      (error: Error) => worker.push("turnDone", error.message),
    );
    return { outcome, containerId: instance.containerId, agentSessionId: sessionId };
  },
  listSessions: async () =>
    (await opened().store.sessions.list()).map((s) => ({
      id: s.id,
      sandboxKey: s.sandboxKey,
      agent: s.agent,
    })),
  /** Pushes every event of the chat as the store delivers it: history first, then live. */
  follow: (params: { sessionId: string }) => {
    followSession(opened().store, params.sessionId, (batch) => {
      for (const { seq, event } of batch)
        worker.push("event", { seq, type: event.type, text: textOf(event) });
    });
  },
  /** What another replica does for a chat it did not drive: the sandbox by key, the session from the store. */
  takeOver: async (params: { key: string; sessionId: string }) => {
    const { instance, outcome } = await sandbox(params.key);
    client = await SandboxAgentClient.reattach({
      store: opened().store,
      sessionId: params.sessionId,
      token: instance.server.token,
    });
    return { outcome, containerId: instance.containerId, agentSessionId: client.agentSessionId };
  },
  prompt: async (params: { key: string; prompt: string }) => {
    await opened().fleet.touch(params.key);
    const { stopReason } = await client!.prompt({
      sessionId: client!.agentSessionId!,
      prompt: params.prompt,
    });
    await opened().fleet.touch(params.key);
    return stopReason;
  },
  getOrCreate: async (params: { key: string }) => {
    const { instance, outcome } = await sandbox(params.key);
    await instance.dispose();
    return { outcome, containerId: instance.containerId };
  },
  stop: (params: { key: string }) => opened().fleet.stop(params.key),
  destroy: (params: { key: string }) => opened().fleet.destroy(params.key),
  reap: () => opened().fleet.reap(),
  close: async () => {
    await client?.release();
    await fleet?.close();
    await store?.close();
  },
});
