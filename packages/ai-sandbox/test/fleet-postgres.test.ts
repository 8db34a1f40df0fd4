import {
  closeWorkers,
  needService,
  postgresMissing,
  repoRoot,
  startPostgres,
  startWorker,
  tempDir,
  waitFor,
  type PostgresCluster,
  type Worker,
} from "@sandbox-agent/testkit";
import { migrate } from "@sandbox-agent/session-store-postgres";
import assert from "node:assert/strict";
import { existsSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { groupSurvivors } from "./helpers.js";

const replicaScript = path.join(repoRoot, "packages/ai-sandbox/dist/test/fleet-replica.js");

interface Got {
  outcome: "created" | "resumed";
  providerId: string;
  status: string;
}

describe(
  "fleet: replicas in separate processes sharing PostgreSQL",
  {
    skip: needService("postgresql", postgresMissing()),
    timeout: 180_000,
  },
  () => {
    let cluster: PostgresCluster;
    let admin: pg.Client;
    const parentDir = tempDir("sandbox-agent-fleet-pg-");
    const workers: Worker[] = [];
    const replica = async (name: string, options: Record<string, unknown> = {}): Promise<Worker> => {
      const worker = startWorker(replicaScript, { env: { DATABASE_URL: cluster.connectionString } });
      workers.push(worker);
      await worker.call("open", { parentDir, name, ...options });
      return worker;
    };
    const live = async (): Promise<number> =>
      (
        await admin.query(
          "SELECT count(*)::int AS n FROM sandbox_agent.sandboxes WHERE status IN ('starting','running','stopping')",
        )
      ).rows[0].n;
    const queued = async (): Promise<number> =>
      (await admin.query("SELECT count(*)::int AS n FROM sandbox_agent.capacity_queue")).rows[0].n;

    before(async () => {
      cluster = await startPostgres();
      await migrate({ connectionString: cluster.connectionString });
      admin = new pg.Client({ connectionString: cluster.connectionString });
      await admin.connect();
    });
    after(async () => {
      // Leave no sandbox process behind: destroy whatever the tests left.
      const { rows } = await admin.query("SELECT key FROM sandbox_agent.sandboxes");
      const closer = workers.find((w) => w.process.exitCode === null && w.process.signalCode === null);
      for (const { key } of rows) await closer?.call("destroy", { key }).catch(() => undefined);
      await closeWorkers(workers);
      await admin?.end();
      await cluster?.stop();
      if (cluster) assert.throws(() => process.kill(cluster.pid, 0), "the postmaster is gone");
      rmSync(parentDir, { recursive: true, force: true });
    });

    it("getOrCreate of the same keys from two processes at once creates each sandbox once", async () => {
      const [a, b] = [await replica("race-a"), await replica("race-b")];
      const keys = ["r1", "r2", "r3", "r4"];
      const results = await Promise.all(
        keys.flatMap((key) =>
          [a, b, a, b].map((w) => w.call<Got>("getOrCreate", { key }).then((r) => ({ key, ...r }))),
        ),
      );
      for (const key of keys) {
        const mine = results.filter((r) => r.key === key);
        assert.equal(mine.filter((r) => r.outcome === "created").length, 1, `${key}: exactly one creation`);
        assert.equal(new Set(mine.map((r) => r.providerId)).size, 1, `${key}: one sandbox for all callers`);
        assert.ok(mine.every((r) => r.status === "running"));
        assert.ok(existsSync(path.join(parentDir, key, "sandbox.json")));
      }
      for (const key of keys) await a.call("destroy", { key });
    });

    it("a cap of 3 with 5 concurrent creates from two processes: 2 wait in line and are served as slots free", async () => {
      const [a, b] = [await replica("cap-a", { maxLive: 3 }), await replica("cap-b", { maxLive: 3 })];
      let maxSeen = 0;
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          maxSeen = Math.max(maxSeen, await live());
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      })();
      const served: string[] = [];
      const calls = ["c1", "c2", "c3", "c4", "c5"].map((key, i) =>
        (i % 2 === 0 ? a : b).call<Got>("getOrCreate", { key }).then((r) => (served.push(key), r)),
      );
      await waitFor(
        async () => served.length === 3 && (await queued()) === 2,
        30_000,
        "3 served and 2 in line",
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(served.length, 3, "the two in line stay there while the fleet is full");
      assert.equal(await live(), 3);

      const [first, second] = served;
      await b.call("stop", { key: first });
      await waitFor(() => served.length === 4, 30_000, "the first in line to be served");
      assert.equal(await queued(), 1);
      await a.call("stop", { key: second });
      await waitFor(() => served.length === 5, 30_000, "the second in line to be served");
      const outcomes = await Promise.all(calls);
      assert.ok(outcomes.every((r) => r.outcome === "created"));
      sampling = false;
      await sampler;
      assert.ok(maxSeen <= 3, `live sandboxes never exceeded the cap (saw ${maxSeen})`);
      assert.equal(await queued(), 0);

      // Full again (3 live): a replica with a short wait gets a clear error and leaves the line.
      const impatient = await replica("cap-c", { maxLive: 3, waitTimeoutMs: 500 });
      await assert.rejects(
        impatient.call("getOrCreate", { key: "c6" }),
        /no free slot for a "local-process" sandbox after \d+ ms: 3 of 3 are live and 0 request\(s\) wait ahead/,
      );
      assert.equal(await queued(), 0, "the timed-out request left the queue");
      for (const key of ["c1", "c2", "c3", "c4", "c5"]) await a.call("destroy", { key });
    });

    it("two replicas reaping at once stop each idle sandbox exactly once; its processes die, its files stay", async () => {
      const [a, b] = [
        await replica("reap-a", { idleTtlMs: 300 }),
        await replica("reap-b", { idleTtlMs: 300 }),
      ];
      const keys = ["i1", "i2", "i3", "i4", "i5", "i6"];
      const groups: number[] = [];
      for (const key of keys) {
        await a.call("getOrCreate", { key });
        await a.call("writeFile", { key, path: "kept.txt", content: key });
        groups.push(await a.call<number>("spawnSleep", { key }));
      }
      const reaped: string[] = [];
      await waitFor(
        async () => {
          const passes = await Promise.all([a, b, a, b].map((w) => w.call<{ reaped: string[] }>("reap")));
          reaped.push(...passes.flatMap((p) => p.reaped));
          return reaped.length >= keys.length;
        },
        30_000,
        "every idle sandbox to be reaped",
      );
      assert.deepEqual([...reaped].sort(), keys, "each sandbox reaped once, by one replica");
      for (const pgid of groups) assert.deepEqual(await groupSurvivors(pgid), []);
      const { rows } = await admin.query("SELECT status FROM sandbox_agent.sandboxes WHERE key = ANY($1)", [
        keys,
      ]);
      assert.deepEqual(
        rows.map((r) => r.status),
        keys.map(() => "stopped"),
      );
      assert.equal(readFileSync(path.join(parentDir, "i1", "workspace", "kept.txt"), "utf8"), "i1");
      for (const key of keys) await b.call("destroy", { key });
    });

    it("after an app process is killed, another reattaches to its sandbox by key: no second sandbox", async () => {
      const doomed = await replica("crash-a");
      const made = await doomed.call<Got>("getOrCreate", { key: "x1" });
      await doomed.call("writeFile", { key: "x1", path: "progress.txt", content: "turn 1" });
      const pgid = await doomed.call<number>("spawnSleep", { key: "x1" });
      doomed.process.kill("SIGKILL");
      await new Promise((resolve) => doomed.process.once("exit", resolve));

      const survivor = await replica("crash-b");
      const again = await survivor.call<Got>("getOrCreate", { key: "x1" });
      assert.equal(again.outcome, "resumed");
      assert.equal(again.providerId, made.providerId);
      assert.equal(await survivor.call("readFile", { key: "x1", path: "progress.txt" }), "turn 1");
      assert.ok((await groupSurvivors(pgid)).length > 0, "the sandbox's processes outlived the app");
      await survivor.call("destroy", { key: "x1" });
      assert.deepEqual(await groupSurvivors(pgid), []);
    });
  },
);
