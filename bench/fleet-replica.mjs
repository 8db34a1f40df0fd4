// A second application replica for bench/fleet.mjs: its own store (and fleet) on the shared database.
import { performance } from "node:perf_hooks";
import { createFleet, localProcessSandbox } from "@sandbox-agent/ai-sandbox";
import { dockerSandbox } from "@sandbox-agent/sandbox-docker";
import { postgresSessionStore } from "@sandbox-agent/session-store-postgres";
import { serveWorker } from "@sandbox-agent/testkit";

let store;
let fleet;
let containers;
const now = () => performance.timeOrigin + performance.now();

serveWorker({
  open: async ({ parentDir }) => {
    store = await postgresSessionStore({ applicationName: "bench-writer" });
    fleet = createFleet({ provider: localProcessSandbox({ parentDir }), store });
  },
  /** `count` single-event appends, one every `gapMs`, each carrying its send time. */
  appendPaced: async ({ sessionId, count, gapMs }) => {
    for (let i = 0; i < count; i++) {
      await store.events.append(sessionId, [{ data: { i, sentAt: now() } }]);
      await new Promise((resolve) => setTimeout(resolve, gapMs));
    }
  },
  /** `count` raw NOTIFYs (no table, no read): the floor of replica-to-replica latency. */
  notifyPaced: async ({ channel, count, gapMs }) => {
    for (let i = 0; i < count; i++) {
      await store.pool.query("SELECT pg_notify($1, $2)", [channel, String(now())]);
      await new Promise((resolve) => setTimeout(resolve, gapMs));
    }
  },
  getOrCreate: async ({ key }) => (await fleet.getOrCreate(key)).outcome,
  /** A fleet of container sandboxes on the same store (`options`: dockerSandbox's). */
  openContainers: ({ options }) => {
    containers = createFleet({ provider: dockerSandbox({ ...options, persistent: true }), store });
  },
  createContainer: async ({ key }) => {
    const { instance, outcome } = await containers.getOrCreate(key);
    await instance.dispose();
    return outcome;
  },
  stopContainer: ({ key }) => containers.stop(key),
  close: async () => {
    await containers?.close();
    await fleet?.close();
    await store?.close();
  },
});
