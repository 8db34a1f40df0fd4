import type {
  PermissionRequest,
  PromptContent,
  SessionMetadata,
  SessionUpdate,
  StopReason,
} from "./types.js";

/** A streaming update of a session: message and thought chunks, tool calls, plans, mode changes… */
export interface SessionUpdateEvent {
  type: "update";
  sessionId: string;
  update: SessionUpdate;
  metadata: SessionMetadata;
}

/** The agent asked for permission (reported before the `onPermissionRequest` handler decides). */
export interface PermissionRequestEvent {
  type: "permission";
  request: PermissionRequest;
}

/** A prompt was sent: a turn of the session begins (so that followers see the user's part too). */
export interface TurnStartedEvent {
  type: "turnStarted";
  sessionId: string;
  prompt: PromptContent[];
}

/** A prompt turn of a session finished. */
export interface TurnEndedEvent {
  type: "turnEnded";
  sessionId: string;
  stopReason: StopReason;
}

/** The agent refused the prompt with a JSON-RPC error: the turn ended without a stop reason. */
export interface TurnFailedEvent {
  type: "turnFailed";
  sessionId: string;
  error: { code: number; message: string };
}

/**
 * Lifecycle: a session ended. `reason` is `agent_exited` when the agent process is gone (the
 * connection closes too; `exitCode`, `signal` and `stderrTail` say how) or `terminated` after
 * `terminateSession()` (the connection stays open).
 */
export interface SessionEndedEvent {
  type: "ended";
  sessionId?: string;
  reason: "agent_exited" | "terminated" | (string & {});
  exitCode: number | null;
  signal: string | null;
  /** Last lines the agent wrote on stderr. */
  stderrTail: string;
  /** For `terminated`: whether the agent confirmed closing the session. */
  closed?: boolean;
}

/** The agent printed a line that is not a protocol message; it was dropped. */
export interface ParseErrorEvent {
  type: "parseError";
  line: string;
  truncated: boolean;
  error: string;
}

/** Any other notification (vendor-specific or a server feature this SDK does not model yet). */
export interface NotificationEvent {
  type: "notification";
  method: string;
  params: unknown;
  sessionId?: string;
}

/** The connection closed (by `disconnect()`, the server, or a transport failure). */
export interface DisconnectedEvent {
  type: "disconnected";
  /** `disconnect` (asked for), `agentExited` (after `ended`), or `error` (transport failure, see `error`). */
  reason: "disconnect" | "agentExited" | "error";
  error?: Error;
}

export type SandboxAgentEvent =
  | SessionUpdateEvent
  | PermissionRequestEvent
  | TurnStartedEvent
  | TurnEndedEvent
  | TurnFailedEvent
  | SessionEndedEvent
  | ParseErrorEvent
  | NotificationEvent
  | DisconnectedEvent;

export type SandboxAgentEventType = SandboxAgentEvent["type"];
export type EventOfType<T extends SandboxAgentEventType> = Extract<SandboxAgentEvent, { type: T }>;

export interface EventFilter {
  /** Only these event types. */
  types?: SandboxAgentEventType[];
  /** Only events of this session (events without a session, like `parseError`, are kept). */
  sessionId?: string;
}

export interface EventStreamOptions extends EventFilter {
  signal?: AbortSignal;
}

type Listener = (event: SandboxAgentEvent) => void;

function sessionOf(event: SandboxAgentEvent): string | undefined {
  if (event.type === "permission") return event.request.sessionId;
  return "sessionId" in event ? event.sessionId : undefined;
}

function matches(filter: EventFilter, event: SandboxAgentEvent): boolean {
  if (filter.types && !filter.types.includes(event.type)) return false;
  if (filter.sessionId === undefined) return true;
  const sessionId = sessionOf(event);
  return sessionId === undefined || sessionId === filter.sessionId;
}

/** Fan-out of events to callbacks and to buffered async iterators (no event is dropped). */
export class EventHub {
  private readonly listeners = new Set<Listener>();
  private readonly streams = new Set<EventQueue>();

  emit(event: SandboxAgentEvent): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(event);
      } catch (error) {
        // A throwing subscriber must not break delivery to the others or the connection.
        queueMicrotask(() => {
          throw error;
        });
      }
    }
    for (const stream of this.streams) stream.push(event);
  }

  subscribe(filter: EventFilter, listener: Listener): () => void {
    const wrapped: Listener = (event) => {
      if (matches(filter, event)) listener(event);
    };
    this.listeners.add(wrapped);
    return () => this.listeners.delete(wrapped);
  }

  stream(options: EventStreamOptions): AsyncIterableIterator<SandboxAgentEvent> {
    const queue = new EventQueue(options, () => this.streams.delete(queue));
    this.streams.add(queue);
    return queue;
  }

  /** Ends every open iterator (after it has yielded what it buffered). */
  endStreams(): void {
    for (const stream of [...this.streams]) stream.end();
  }
}

class EventQueue implements AsyncIterableIterator<SandboxAgentEvent> {
  private readonly buffer: SandboxAgentEvent[] = [];
  private waiter: ((result: IteratorResult<SandboxAgentEvent>) => void) | undefined;
  private done = false;
  private readonly onAbort = (): void => this.end();

  constructor(
    private readonly filter: EventStreamOptions,
    private readonly detach: () => void,
  ) {
    if (filter.signal?.aborted) this.end();
    filter.signal?.addEventListener("abort", this.onAbort, { once: true });
  }

  push(event: SandboxAgentEvent): void {
    if (this.done || !matches(this.filter, event)) return;
    if (this.waiter) {
      const resolve = this.waiter;
      this.waiter = undefined;
      resolve({ value: event, done: false });
    } else {
      this.buffer.push(event);
    }
  }

  end(): void {
    if (this.done) return;
    this.done = true;
    this.detach();
    this.filter.signal?.removeEventListener("abort", this.onAbort);
    if (this.waiter) {
      const resolve = this.waiter;
      this.waiter = undefined;
      resolve({ value: undefined, done: true });
    }
  }

  next(): Promise<IteratorResult<SandboxAgentEvent>> {
    const event = this.buffer.shift();
    if (event) return Promise.resolve({ value: event, done: false });
    if (this.done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => (this.waiter = resolve));
  }

  return(): Promise<IteratorResult<SandboxAgentEvent>> {
    this.buffer.length = 0;
    this.end();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<SandboxAgentEvent> {
    return this;
  }
}
