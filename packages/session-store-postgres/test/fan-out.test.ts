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
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { migrate } from "../src/index.js";

const replicaScript = path.join(repoRoot, "packages/session-store-postgres/dist/test/replica.js");

interface Received {
  count: number;
  exact: boolean;
  lastSeq: number;
  errors: number;
}

describe("live fan-out between replicas", { skip: needService("postgresql", postgresMissing()) }, () => {
  let cluster: PostgresCluster;
  let admin: pg.Client;
  const workers: Worker[] = [];
  const replica = async (name: string): Promise<Worker> => {
    const worker = startWorker(replicaScript, { env: { DATABASE_URL: cluster.connectionString } });
    workers.push(worker);
    await worker.call("open", { applicationName: name });
    return worker;
  };
  /** Terminates the backends of `names` (their store reconnects); resolves how many were killed. */
  const kill = async (...names: string[]): Promise<number> => {
    const { rows } = await admin.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ANY($1)",
      [names],
    );
    return rows.length;
  };
  const listenerPid = async (name: string): Promise<number | undefined> => {
    const { rows } = await admin.query("SELECT pid FROM pg_stat_activity WHERE application_name = $1", [
      `${name} listener`,
    ]);
    return rows[0]?.pid;
  };

  before(async () => {
    cluster = await startPostgres();
    await migrate({ connectionString: cluster.connectionString });
    admin = new pg.Client({ connectionString: cluster.connectionString });
    await admin.connect();
  });
  after(async () => {
    await closeWorkers(workers);
    await admin?.end();
    await cluster?.stop();
    if (cluster) assert.throws(() => process.kill(cluster.pid, 0), "the postmaster is gone");
  });

  it("B sees every event A appends exactly once, in order, across killed listener and pool connections", async () => {
    const [a, b] = [await replica("replica-a"), await replica("replica-b")];
    await a.call("createSession", { id: "s1" });
    await b.call("subscribe", { sessionId: "s1" });
    const got = (): Promise<Received> => b.call<Received>("received", { sessionId: "s1" });

    // A first stretch, delivered live.
    await a.call("append", { sessionId: "s1", from: 1, batches: 10, size: 100 });
    await waitFor(async () => (await got()).count === 1000, 20_000, "B to receive 1,000 events");
    const firstListener = await listenerPid("replica-b");
    assert.ok(firstListener, "B listens on its own connection");

    // Kill B's listener, then append while it is down: B must catch up from its cursor.
    assert.equal(await kill("replica-b listener"), 1);
    await a.call("append", { sessionId: "s1", from: 1001, batches: 10, size: 100 });
    await waitFor(async () => (await got()).count === 2000, 20_000, "B to catch up after its listener died");
    const secondListener = await waitFor(() => listenerPid("replica-b"), 10_000, "B's listener to reconnect");
    assert.notEqual(secondListener, firstListener);

    // Kill every connection of B (listener and pool) while A streams: reads retry, nothing is lost.
    const streaming = a.call("append", { sessionId: "s1", from: 2001, batches: 60, size: 50 });
    await waitFor(async () => (await got()).count > 2100, 20_000, "B to receive part of the stream");
    assert.ok((await kill("replica-b listener", "replica-b")) >= 1);
    assert.equal(await streaming, 5000);
    await waitFor(async () => (await got()).count >= 5000, 30_000, "B to receive all 5,000 events");

    const final = await got();
    assert.equal(final.count, 5000, "no duplicates");
    assert.equal(final.exact, true, "seq and payload run 1..5000 without gap, repeat or reordering");
  });

  it("two subscribers in two other processes get the same events; a late one gets the history first", async () => {
    const [a, b, c] = [await replica("writer"), await replica("reader-1"), await replica("reader-2")];
    await a.call("createSession", { id: "s2" });
    await b.call("subscribe", { sessionId: "s2" });
    await a.call("append", { sessionId: "s2", from: 1, batches: 5, size: 40 });
    await c.call("subscribe", { sessionId: "s2" });
    await a.call("append", { sessionId: "s2", from: 201, batches: 5, size: 40 });
    for (const reader of [b, c]) {
      await waitFor(
        async () => (await reader.call<Received>("received", { sessionId: "s2" })).count === 400,
        20_000,
      );
      const final = await reader.call<Received>("received", { sessionId: "s2" });
      assert.deepEqual([final.count, final.exact], [400, true]);
    }
  });
});
