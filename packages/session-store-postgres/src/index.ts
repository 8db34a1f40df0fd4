/**
 * PostgreSQL driver of `@sandbox-agent/session-store`: one store shared by every replica of an
 * application, with leases and capacity admission done in the database and live event fan-out over
 * LISTEN/NOTIFY (no other broker).
 */
export {
  migrate,
  postgresSessionStore,
  type PostgresSessionStore,
  type PostgresSessionStoreOptions,
} from "./store.js";
export { SCHEMA_VERSION } from "./migrations.js";
