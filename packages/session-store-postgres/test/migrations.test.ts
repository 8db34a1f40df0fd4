import { needService, postgresMissing, startPostgres, type PostgresCluster } from "@sandbox-agent/testkit";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { SCHEMA_VERSION, migrate, postgresSessionStore } from "../src/index.js";

describe("schema migrations", { skip: needService("postgresql", postgresMissing()) }, () => {
  let cluster: PostgresCluster;
  let admin: pg.Client;
  before(async () => {
    cluster = await startPostgres();
    admin = new pg.Client({ connectionString: cluster.connectionString });
    await admin.connect();
  });
  after(async () => {
    await admin?.end();
    await cluster?.stop();
  });

  it("replicas migrating at once: one creates the schema, the others wait and find it done", async () => {
    const connectionString = cluster.connectionString;
    const results = await Promise.all(
      Array.from({ length: 6 }, () => migrate({ connectionString, schema: "race" })),
    );
    assert.equal(results.filter((r) => r.from === 0).length, 1, "exactly one replica applied the steps");
    assert.ok(results.every((r) => r.to === SCHEMA_VERSION));
    const { rows } = await admin.query("SELECT version FROM race.schema_migrations ORDER BY version");
    assert.deepEqual(
      rows.map((r) => r.version),
      Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1),
    );
    assert.deepEqual(await migrate({ connectionString, schema: "race" }), {
      from: SCHEMA_VERSION,
      to: SCHEMA_VERSION,
    });
  });

  it("refuses a database whose schema is newer than the driver", async () => {
    const connectionString = cluster.connectionString;
    await migrate({ connectionString, schema: "future" });
    await admin.query(
      "INSERT INTO future.schema_migrations (version, name) VALUES ($1, 'from a newer release')",
      [SCHEMA_VERSION + 1],
    );
    await assert.rejects(
      postgresSessionStore({ connectionString, schema: "future" }),
      /newer than this driver/,
    );
  });

  it("takes DATABASE_URL, and says what to do without a database", async () => {
    const saved = process.env.DATABASE_URL;
    try {
      delete process.env.DATABASE_URL;
      await assert.rejects(postgresSessionStore(), /pass \{ connectionString \} or set DATABASE_URL/);
      process.env.DATABASE_URL = cluster.connectionString;
      const store = await postgresSessionStore({ schema: "from_env" });
      await store.sessions.create({ id: "s", sandboxKey: "k", agent: "mock" });
      assert.equal((await store.sessions.get("s"))?.agent, "mock");
      await store.close();
      await assert.rejects(postgresSessionStore({ schema: "Bad-Name" }), /schema must match/);
    } finally {
      if (saved === undefined) delete process.env.DATABASE_URL;
      else process.env.DATABASE_URL = saved;
    }
  });
});
