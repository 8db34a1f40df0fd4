/**
 * The event mirror of a client bound to a session of a `SessionStore`: every event of the agent
 * connection, derived from its messages in wire order, appended to the store in batches with the
 * SSE event id it came with, so another replica can follow the session (history, then live) and take
 * the connection over exactly where the mirror stops.
 */
import type { NewEvent, SessionStore } from "@sandbox-agent/session-store";
import type { AcpEnvelope } from "acp-http-client";
import { adoptedTurnEnd, toEvent } from "./connection.js";
import type { SandboxAgentEvent } from "./events.js";
import { isRecord } from "./metadata.js";
import type { PermissionRequest, PromptContent, StopReason } from "./types.js";

const PROMPT_METHOD = "session/prompt";
const PERMISSION_METHOD = "session/request_permission";
const RETRY_MIN_MS = 50;
const RETRY_MAX_MS = 2_000;

type JsonRpcId = string | number | null;
const key = (id: JsonRpcId): string => `${typeof id}:${String(id)}`;

export interface MirrorOptions {
  store: SessionStore;
  /** The session's id in the store. */
  sessionId: string;
  /**
   * The agent session a turn of an earlier client belongs to: its prompt's answer reaches this
   * client unmatched after a takeover, and ends that turn.
   */
  agentSessionId(): string | null;
  /** The resume point recorded so far (a takeover starts from it). */
  resumeFrom: string | null;
  /**
   * After a takeover: the last event id the earlier client mirrored. The events up to it arrive again
   * (the resume point may lie before them) and are neither mirrored nor reported again.
   */
  skipThrough: string | null;
  onError(error: Error): void;
}

/**
 * Derives events from the connection's messages (`observe`) and stream positions (`position`) in wire
 * order and writes them to the store, one batch at a time, in order. The session's `lastEventId`
 * moves with each batch to the **resume point**: the last position whose events are all written,
 * but never past an agent request this client has not answered yet, so that a replica taking over
 * after a crash is sent that request again and can answer it.
 */
export class SessionMirror {
  readonly #options: MirrorOptions;
  readonly #pending: NewEvent[] = [];
  /** Prompts this client sent, by JSON-RPC id → their session. */
  readonly #prompts = new Map<string, string>();
  /** Agent requests not answered yet, by id → the position just before them. */
  readonly #unanswered = new Map<string, string | null>();
  #position: string | null;
  #written: string | null;
  #skipThrough: string | null;
  #suppressed = 0;
  #writing: Promise<void> | undefined;
  readonly #ready: Promise<void>;
  #markReady!: () => void;
  #started = false;
  #closed = false;
  #positioned!: () => void;
  /** Resolves once the stream's first position (its priming event) is known. */
  readonly positioned = new Promise<void>((resolve) => (this.#positioned = resolve));

  constructor(options: MirrorOptions) {
    this.#options = options;
    this.#position = options.resumeFrom;
    this.#written = options.resumeFrom;
    this.#skipThrough = options.skipThrough !== options.resumeFrom ? options.skipThrough : null;
    this.#ready = new Promise((resolve) => (this.#markReady = resolve));
  }

  /** Writes start once the session record exists (queued events wait until then). */
  start(): void {
    this.#started = true;
    this.#markReady();
  }

  /** Messages observed meanwhile are not mirrored (e.g. a `session/load` replaying old history). */
  async suppress<T>(work: () => Promise<T>): Promise<T> {
    this.#suppressed++;
    try {
      return await work();
    } finally {
      this.#suppressed--;
    }
  }

  /**
   * One message of the connection, in wire order (both directions). Returns false for a message the
   * earlier client had mirrored already (after a takeover): it is not to be reported again.
   */
  observe(envelope: AcpEnvelope): boolean {
    const { message, eventId } = envelope;
    const id = "id" in message ? (message.id as JsonRpcId) : undefined;
    const method = "method" in message ? message.method : undefined;
    if (envelope.direction === "outbound") {
      if (method === PROMPT_METHOD && id !== undefined) this.#promptSent(id, message);
      else if (method === undefined && id !== undefined) this.#answered(id);
      return true;
    }
    const skipped = this.#skipThrough !== null && eventId !== undefined;
    if (method !== undefined && id !== undefined) {
      this.#unanswered.set(key(id), this.#position);
      if (method === PERMISSION_METHOD && !skipped) this.#add(permissionEvent(message), eventId);
    } else if (method !== undefined && !skipped) {
      this.#add(toEvent(method, "params" in message ? message.params : undefined), eventId);
    } else if (id !== undefined && !skipped) {
      const event = this.#answer(id, message, envelope.unmatched === true);
      if (event) this.#add(event, eventId);
    }
    this.position(eventId);
    return !skipped;
  }

  /** The connection stream reached `eventId` (messages and priming events alike). */
  position(eventId: string | undefined): void {
    if (eventId === undefined || eventId === this.#position) return;
    this.#position = eventId;
    this.#positioned();
    if (eventId === this.#skipThrough) this.#skipThrough = null;
    this.#schedule();
  }

  /** Waits until everything observed so far is written. */
  async flush(): Promise<void> {
    while (this.#started && this.#writing) await this.#writing;
  }

  /** Stops writing (what is not written yet is dropped). */
  close(): void {
    this.#closed = true;
    this.#markReady();
  }

  /** Where a replica that takes over resumes: before the oldest unanswered agent request. */
  get resumePoint(): string | null {
    const [oldest] = this.#unanswered.values();
    return oldest !== undefined ? oldest : this.#position;
  }

  #promptSent(id: JsonRpcId, message: AcpEnvelope["message"]): void {
    const params = "params" in message && isRecord(message.params) ? message.params : {};
    const sessionId = typeof params.sessionId === "string" ? params.sessionId : "";
    this.#prompts.set(key(id), sessionId);
    const prompt = Array.isArray(params.prompt) ? (params.prompt as PromptContent[]) : [];
    this.#add({ type: "turnStarted", sessionId, prompt }, undefined);
  }

  #answered(id: JsonRpcId): void {
    if (this.#unanswered.delete(key(id))) this.#schedule();
  }

  /** The end of a turn, when `message` answers a prompt: this client's, or (unmatched) an earlier client's. */
  #answer(id: JsonRpcId, message: AcpEnvelope["message"], unmatched: boolean): SandboxAgentEvent | undefined {
    // An unmatched answer is never to one of this client's prompts, whatever its id.
    const own = unmatched ? undefined : this.#prompts.get(key(id));
    if (own !== undefined) this.#prompts.delete(key(id));
    const result = "result" in message && isRecord(message.result) ? message.result : undefined;
    if (own !== undefined) {
      if (result) return { type: "turnEnded", sessionId: own, stopReason: result.stopReason as StopReason };
      const error: Record<string, unknown> =
        "error" in message && isRecord(message.error) ? message.error : {};
      return {
        type: "turnFailed",
        sessionId: own,
        error: { code: Number(error.code ?? 0), message: String(error.message ?? "") },
      };
    }
    return adoptedTurnEnd(
      { direction: "inbound", message, ...(unmatched ? { unmatched } : {}) },
      this.#options.agentSessionId(),
    );
  }

  #add(event: SandboxAgentEvent, eventId: string | undefined): void {
    if (this.#suppressed > 0 || this.#closed) return;
    this.#pending.push(eventId === undefined ? { data: event } : { data: event, eventId });
    this.#schedule();
  }

  #schedule(): void {
    if (this.#writing || this.#closed) return;
    this.#writing = this.#ready
      .then(() => this.#drain())
      .finally(() => {
        this.#writing = undefined;
        // Something may have arrived between the drain's last check and now.
        if (this.#dirty()) this.#schedule();
      });
  }

  #dirty(): boolean {
    return !this.#closed && (this.#pending.length > 0 || this.resumePoint !== this.#written);
  }

  /** Writes batches until nothing is left; a failed write is retried, so order and content hold. */
  async #drain(): Promise<void> {
    // Let the messages of one network read join the batch.
    await Promise.resolve();
    let delay = RETRY_MIN_MS;
    while (this.#dirty()) {
      const batch = this.#pending.slice();
      const resumeFrom = this.resumePoint;
      try {
        await this.#write(batch, resumeFrom);
        this.#pending.splice(0, batch.length);
        this.#written = resumeFrom;
        delay = RETRY_MIN_MS;
      } catch (error) {
        this.#options.onError(error instanceof Error ? error : new Error(String(error)));
        // The record is gone (deleted by the application): nothing left to mirror into.
        if ((error as Error).name === "UnknownSessionError") return this.close();
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, RETRY_MAX_MS);
      }
    }
  }

  async #write(batch: NewEvent[], lastEventId: string | null): Promise<void> {
    const { store, sessionId } = this.#options;
    if (batch.length > 0 && store.events) await store.events.append(sessionId, batch, { lastEventId });
    else await store.sessions.update(sessionId, { lastEventId });
  }
}

function permissionEvent(message: AcpEnvelope["message"]): SandboxAgentEvent {
  const params = ("params" in message && isRecord(message.params) ? message.params : {}) as Record<
    string,
    unknown
  >;
  const request = {
    sessionId: params.sessionId,
    toolCall: params.toolCall,
    options: params.options,
  } as PermissionRequest;
  return { type: "permission", request };
}

/**
 * The id of the last event the mirror holds that came from the server's stream: where an earlier
 * client's mirroring stopped. Reads back from the end in windows (events without an id, such as
 * `turnStarted`, are skipped).
 */
export async function lastMirroredEventId(store: SessionStore, sessionId: string): Promise<string | null> {
  const record = await store.sessions.get(sessionId);
  if (!store.events || !record) return null;
  for (let end = record.lastSeq; end > 0; end -= 100) {
    const window = await store.events.read(sessionId, { after: Math.max(0, end - 100), limit: 100 });
    const withId = window.filter((e) => e.seq <= end && e.eventId !== null);
    if (withId.length > 0) return withId[withId.length - 1]!.eventId;
  }
  return null;
}
