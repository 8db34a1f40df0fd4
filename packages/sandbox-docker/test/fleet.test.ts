import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { postgresSessionStore, type PostgresSessionStore } from "@sandbox-agent/session-store-postgres";
import {
  closeWorkers,
  needService,
  postgresMissing,
  repoRoot,
  startPostgres,
  startWorker,
  waitFor,
  type PostgresCluster,
  type Worker,
} from "@sandbox-agent/testkit";
import {
  docker,
  engineSkip,
  RUN_ID,
  RUN_LABEL,
  runContainers,
  testOptions,
  waitNoContainers,
} from "./helpers.js";

const appScript = path.join(repoRoot, "packages/sandbox-docker/dist/test/fleet-app.js");
const CHUNKS = 150;

interface Pushed {
  seq: number;
  type: string;
  text?: string;
}

interface Got {
  outcome: "created" | "resumed";
  containerId: string;
  agentSessionId?: string | null;
}

describe(
  "fleet end to end: two app processes share PostgreSQL and drive container sandboxes",
  {
    skip: engineSkip || needService("postgresql", postgresMissing()),
    timeout: 300_000,
  },
  () => {
    let cluster: PostgresCluster;
    let store: PostgresSessionStore;
    const workers: Worker[] = [];
    const keys: string[] = [];
    const replica = async (name: string, options: Record<string, unknown> = {}): Promise<Worker> => {
      const worker = startWorker(appScript, { env: { DATABASE_URL: cluster.connectionString } });
      workers.push(worker);
      await worker.call("open", { name, options: testOptions(), ...options });
      return worker;
    };
    const key = (name: string): string => {
      keys.push(`${name}-${RUN_ID}`);
      return keys.at(-1)!;
    };
    const running = async (containerId: string) =>
      (await docker.getContainer(containerId).inspect()).State.Running;
    const count = async (sql: string, values: unknown[] = []): Promise<number> =>
      (await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n ${sql}`, values)).rows[0]!.n;

    before(async () => {
      cluster = await startPostgres();
      store = await postgresSessionStore({
        connectionString: cluster.connectionString,
        applicationName: "test",
      });
    });
    after(async () => {
      // Leave nothing behind: every sandbox destroyed through a live replica, then the database.
      const live = workers.find((w) => w.process.exitCode === null && w.process.signalCode === null);
      for (const k of keys) await live?.call("destroy", { key: k }).catch(() => undefined);
      await closeWorkers(workers);
      await store?.close();
      await cluster?.stop();
      if (cluster) assert.throws(() => process.kill(cluster.pid, 0), "the postmaster is gone");
      await waitNoContainers(`${RUN_LABEL}=${RUN_ID}`);
    });

    it("B follows A's turn, takes over when A is killed mid-turn, and finishes the next turn: every event once, one container", async () => {
      const chat = key("chat");
      const [a, b] = [await replica("app-a"), await replica("app-b")];
      const started = await a.call<Got>("startChat", {
        key: chat,
        sessionId: "chat-1",
        prompt: `slow ${CHUNKS} 20`,
      });
      assert.equal(started.outcome, "created");

      assert.deepEqual(await b.call("listSessions"), [{ id: "chat-1", sandboxKey: chat, agent: "mock" }]);
      await b.call("follow", { sessionId: "chat-1" });
      const events = () => b.events<Pushed>("event");
      await waitFor(
        () => events().filter((e) => e.type === "update").length >= 30,
        30_000,
        "A's turn under way",
      );
      a.process.kill("SIGKILL");
      await new Promise((resolve) => a.process.once("exit", resolve));
      const seenAtKill = events().length;
      assert.ok(seenAtKill < CHUNKS, "A died mid-turn");

      const took = await b.call<Got>("takeOver", { key: chat, sessionId: "chat-1" });
      assert.equal(took.outcome, "resumed");
      assert.equal(took.containerId, started.containerId, "the same container, by key");
      assert.equal(took.agentSessionId, started.agentSessionId, "the same agent session, from the store");
      await waitFor(() => events().some((e) => e.type === "turnEnded"), 30_000, "A's turn to end");
      assert.equal(await b.call("prompt", { key: chat, prompt: "echo after the takeover" }), "end_turn");
      await waitFor(() => events().filter((e) => e.type === "turnEnded").length === 2, 30_000, "B's turn");

      const all = events();
      assert.deepEqual(
        all.map((e) => e.seq),
        all.map((_, i) => i + 1),
        "every event once, in order, no gap",
      );
      assert.deepEqual(
        all.map((e) => e.type),
        [
          "turnStarted",
          ...Array.from({ length: CHUNKS }, () => "update"),
          "turnEnded",
          "turnStarted",
          "update",
          "turnEnded",
        ],
      );
      assert.deepEqual(
        all.flatMap((e) => (e.text === undefined ? [] : [e.text])),
        [...Array.from({ length: CHUNKS }, (_, i) => `chunk ${i + 1} `), "after the takeover"],
      );
      const containers = await runContainers(`dev.sandboxagent.key=${chat}`);
      assert.deepEqual(
        containers.map((c) => c.Id),
        [started.containerId],
        "no second container",
      );
      // The replicas hold DATABASE_URL; neither the container nor the agent in it does.
      const { Config } = await docker.getContainer(started.containerId).inspect();
      assert.ok(Config.Env?.length, "the container's environment is readable");
      assert.deepEqual(
        Config.Env.filter((e) => e.startsWith("DATABASE_URL=") || e.includes(cluster.connectionString)),
        [],
        "the container holds no database credentials",
      );
      assert.equal(await b.call("prompt", { key: chat, prompt: "env DATABASE_URL" }), "end_turn");
      await waitFor(
        () => events().filter((e) => e.type === "turnEnded").length === 3,
        30_000,
        "the env turn",
      );
      assert.equal(
        events().findLast((e) => e.text !== undefined)?.text,
        "DATABASE_URL=(unset)",
        "the agent holds no database credentials",
      );
      assert.equal(await b.call("destroy", { key: chat }), true);
      assert.deepEqual(await runContainers(`dev.sandboxagent.key=${chat}`), []);
    });

    it("a cap of 3 with 5 concurrent requests: 2 wait in line and are served; the reaper stops idle sandboxes", async () => {
      const [c, d] = [
        await replica("cap-c", { maxLive: 3, idleTtlMs: 500 }),
        await replica("cap-d", { maxLive: 3, idleTtlMs: 500 }),
      ];
      const live = () =>
        count(
          "FROM sandbox_agent.sandboxes WHERE status IN ('starting','running','stopping') AND key = ANY($1)",
          [keys],
        );
      const queued = () => count("FROM sandbox_agent.capacity_queue");
      const capKeys = ["c1", "c2", "c3", "c4", "c5"].map(key);
      const served: string[] = [];
      let maxSeen = 0;
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          maxSeen = Math.max(maxSeen, await live());
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      })();
      const calls = capKeys.map((k, i) =>
        (i % 2 === 0 ? c : d).call<Got>("getOrCreate", { key: k }).then((got) => (served.push(k), got)),
      );
      await waitFor(async () => served.length === 3 && (await queued()) === 2, 60_000, "3 served, 2 in line");
      await d.call("stop", { key: served[0] });
      await waitFor(() => served.length === 4, 60_000, "the first in line to be served");
      await c.call("stop", { key: served[1] });
      await waitFor(() => served.length === 5, 60_000, "the second in line to be served");
      const got = await Promise.all(calls);
      sampling = false;
      await sampler;
      assert.ok(got.every((g) => g.outcome === "created"));
      assert.ok(maxSeen <= 3, `never more than 3 live (saw ${maxSeen})`);
      assert.equal(await queued(), 0);

      const stillRunning = served.slice(2);
      const reaped: string[] = [];
      await waitFor(
        async () => {
          reaped.push(...(await c.call<{ reaped: string[] }>("reap")).reaped);
          return reaped.length >= stillRunning.length;
        },
        30_000,
        "the reaper to stop the idle sandboxes",
      );
      assert.deepEqual([...reaped].sort(), [...stillRunning].sort(), "each idle sandbox stopped once");
      for (const k of stillRunning) {
        const [container] = await runContainers(`dev.sandboxagent.key=${k}`);
        assert.ok(container, `${k} is kept for resume`);
        assert.equal(await running(container.Id), false, `${k} is stopped`);
      }
      assert.equal(await live(), 0);
    });
  },
);
