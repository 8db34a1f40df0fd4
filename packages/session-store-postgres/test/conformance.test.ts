import { needService, postgresMissing, startPostgres, type PostgresCluster } from "@sandbox-agent/testkit";
import { sessionStoreConformance } from "@sandbox-agent/session-store/conformance";
import { after, before, describe } from "node:test";
import { postgresSessionStore } from "../src/index.js";

describe("postgres driver", { skip: needService("postgresql", postgresMissing()) }, () => {
  let cluster: PostgresCluster;
  before(async () => {
    cluster = await startPostgres();
  });
  after(() => cluster?.stop());

  sessionStoreConformance("postgres", () =>
    postgresSessionStore({ connectionString: cluster.connectionString }),
  );
});
