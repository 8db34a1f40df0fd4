/**
 * One application replica for the multi-process fleet tests: its own fleet on the shared PostgreSQL
 * store (`DATABASE_URL`) and the real local-process provider in a shared directory.
 */
import { postgresSessionStore } from "@sandbox-agent/session-store-postgres";
import { serveWorker } from "@sandbox-agent/testkit";
import { createFleet, localProcessSandbox, type Fleet, type ProviderInstance } from "../src/index.js";

let fleet: Fleet | undefined;
const instances = new Map<string, ProviderInstance>();

const opened = (): Fleet => {
  if (!fleet) throw new Error("call open first");
  return fleet;
};

interface OpenParams {
  parentDir: string;
  name: string;
  maxLive?: number;
  waitTimeoutMs?: number;
  idleTtlMs?: number;
}

serveWorker({
  open: async (params: OpenParams) => {
    const store = await postgresSessionStore({ applicationName: params.name });
    fleet = createFleet({
      provider: localProcessSandbox({ parentDir: params.parentDir }),
      store,
      owner: params.name,
      ...(params.maxLive !== undefined ? { maxLive: params.maxLive } : {}),
      ...(params.waitTimeoutMs !== undefined ? { waitTimeoutMs: params.waitTimeoutMs } : {}),
      // The tests call reap() themselves, from both replicas at once.
      ...(params.idleTtlMs !== undefined ? { idle: { ttlMs: params.idleTtlMs, intervalMs: 3_600_000 } } : {}),
    });
  },
  getOrCreate: async (params: { key: string }) => {
    const { record, instance, outcome } = await opened().getOrCreate(params.key);
    instances.set(params.key, instance);
    return { outcome, providerId: record.providerId, status: record.status };
  },
  /** Starts `sleep` in the sandbox; returns its process group. */
  spawnSleep: async (params: { key: string }) => (await instances.get(params.key)!.spawn("sleep 300")).pid,
  writeFile: (params: { key: string; path: string; content: string }) =>
    instances.get(params.key)!.files.writeFile(params.path, params.content),
  readFile: async (params: { key: string; path: string }) => {
    const bytes = await instances.get(params.key)!.files.readFile(params.path);
    return bytes && Buffer.from(bytes).toString();
  },
  stop: (params: { key: string }) => opened().stop(params.key),
  destroy: (params: { key: string }) => opened().destroy(params.key),
  reap: () => opened().reap(),
  close: async () => {
    await opened().close();
    await opened().store.close();
  },
});
