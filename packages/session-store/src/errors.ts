/** Base class of the store's errors, so callers can tell them from driver (connection) errors. */
export class SessionStoreError extends Error {
  override readonly name: string = "SessionStoreError";
}

/** A lease holder lost its lease (it expired and another replica took it) before it finished. */
export class LeaseLostError extends SessionStoreError {
  override readonly name = "LeaseLostError";
  constructor(
    readonly key: string,
    readonly owner: string,
  ) {
    super(
      `lease on sandbox "${key}" is no longer held by ${owner}: it expired and another replica may have ` +
        `taken it over. Renew leases more often than their TTL, or raise the TTL.`,
    );
  }
}

export class UnknownSessionError extends SessionStoreError {
  override readonly name = "UnknownSessionError";
  constructor(readonly sessionId: string) {
    super(`unknown session "${sessionId}": create its record (sessions.create) first`);
  }
}

export class SessionExistsError extends SessionStoreError {
  override readonly name = "SessionExistsError";
  constructor(readonly sessionId: string) {
    super(`session "${sessionId}" already exists: use sessions.update to change it`);
  }
}

/** Keys and session ids travel in notifications (8,000 bytes at most in PostgreSQL) and in names. */
export const MAX_ID_LENGTH = 512;

/** Throws a TypeError naming `what` unless `id` is a non-empty string of at most {@link MAX_ID_LENGTH} characters. */
export function checkId(what: string, id: unknown): asserts id is string {
  if (typeof id !== "string" || id.length === 0 || id.length > MAX_ID_LENGTH) {
    throw new TypeError(`${what} must be a non-empty string of at most ${MAX_ID_LENGTH} characters`);
  }
}
