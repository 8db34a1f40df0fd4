/** Following a session recorded in a shared store: its mirrored events, history first, then live. */
import type { EventSubscription, SessionStore, SubscribeOptions } from "@sandbox-agent/session-store";
import type { SandboxAgentEvent } from "./events.js";

/** One event of a followed session, as the client that drove the session reported it. */
export interface MirroredEvent {
  /** 1, 2, 3… per session, without gaps: pass the last one as `after` to continue later. */
  seq: number;
  /** The server's SSE event id it came with (null for `turnStarted`, which the client sent). */
  eventId: string | null;
  event: SandboxAgentEvent;
  /** When it was mirrored (ms since the epoch, by the store's clock). */
  createdAt: number;
}

/**
 * Follows a session that a `SandboxAgentClient` with the same `store` drives, from any replica of the
 * application: the events after `options.after` (default: all of them), then each new one as it is
 * mirrored, once and in order, one batch at a time (the next batch waits for `listener`'s promise).
 * Needs no connection to the sandbox. Close the subscription to stop.
 */
export function followSession(
  store: SessionStore,
  sessionId: string,
  listener: (events: MirroredEvent[]) => void | Promise<void>,
  options: SubscribeOptions = {},
): EventSubscription {
  if (!store.events) {
    throw new TypeError(
      "followSession: this store keeps no event mirror; use a driver that does (in-memory, PostgreSQL)",
    );
  }
  return store.events.subscribe(
    sessionId,
    (batch) =>
      listener(
        batch.map((stored) => ({
          seq: stored.seq,
          eventId: stored.eventId,
          event: stored.data as SandboxAgentEvent,
          createdAt: stored.createdAt,
        })),
      ),
    options,
  );
}
