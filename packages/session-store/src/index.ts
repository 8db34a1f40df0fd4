/**
 * The app-side store of a fleet of sandboxes: sandbox records with leases and capacity admission,
 * session records, and an optional mirror of session events. Drivers: `memorySessionStore()` here,
 * PostgreSQL in `@sandbox-agent/session-store-postgres`. Driver authors run
 * `@sandbox-agent/session-store/conformance`.
 */

// ─── The contract ───
export {
  LIVE_STATUSES,
  type AcquireOptions,
  type AdmitOptions,
  type AdmitResult,
  type AppendOptions,
  type EventMirror,
  type EventSubscription,
  type ListSandboxesOptions,
  type ListSessionsOptions,
  type NewEvent,
  type NewSession,
  type ReadEventsOptions,
  type SandboxChange,
  type SandboxLease,
  type SandboxPatch,
  type SandboxRecord,
  type SandboxStatus,
  type SandboxStore,
  type SessionPatch,
  type SessionRecord,
  type SessionRecords,
  type SessionStore,
  type StoredEvent,
  type SubscribeOptions,
} from "./types.js";
export {
  LeaseLostError,
  MAX_ID_LENGTH,
  SessionExistsError,
  SessionStoreError,
  UnknownSessionError,
  checkId,
} from "./errors.js";

// ─── The embedded driver ───
export { memorySessionStore } from "./memory.js";

// ─── For drivers ───
export { EventPump, Subscribers, type EventPumpOptions } from "./subscription.js";
