import type { AnyMessage, AnyRequest } from "@agentclientprotocol/sdk";
import { idKey, isRequest, type JsonRpcId } from "./messages.js";

/** A client message of the WebSocket transport, numbered as the server counts the ones it handles. */
export interface Outgoing {
  /** 1 for the first message after `initialize` (of this server process, see `restarted`). */
  seq: number;
  text: string;
  request: AnyRequest | undefined;
  /** Written on a socket at least once. */
  sent: boolean;
}

/**
 * The messages the server may not have got yet, kept until it says it has them. Nothing is
 * acknowledged per message: the server handles a connection's messages in order, so an answer to
 * request n acknowledges every message up to n (the outbox stays about as long as the requests
 * in flight); and the first frame of a resumed socket says how many it handled.
 */
export class Outbox {
  private entries: Outgoing[] = [];
  private seq = 0;
  /** idKey → seq of the requests kept. */
  private readonly requests = new Map<string, number>();

  add(message: AnyMessage, text: string): Outgoing {
    const entry: Outgoing = {
      seq: ++this.seq,
      text,
      request: isRequest(message) ? message : undefined,
      sent: false,
    };
    this.entries.push(entry);
    if (entry.request) this.requests.set(idKey(entry.request.id), entry.seq);
    return entry;
  }

  /** An answer to `id` came: the server handled that request, so every message before it too. */
  answered(id: JsonRpcId): void {
    const seq = this.requests.get(idKey(id));
    if (seq !== undefined) this.dropThrough(seq);
  }

  /**
   * The same server process took the socket over and handled `received` messages: the others are
   * sent again, in order (returned); the server drops what the old socket still had queued.
   */
  resumeAt(received: number): Outgoing[] {
    this.dropThrough(received);
    return this.entries;
  }

  /**
   * A restarted server: it has no count, and starts one at 0. Messages written on a socket of the
   * old process may or may not have been read: they are taken out (returned) for the caller to
   * settle; the ones never written are numbered again and stay, to be sent to the new process.
   */
  restarted(): Outgoing[] {
    const unknown = this.entries.filter((entry) => entry.sent);
    this.entries = this.entries.filter((entry) => !entry.sent);
    this.requests.clear();
    this.seq = 0;
    for (const entry of this.entries) {
      entry.seq = ++this.seq;
      if (entry.request) this.requests.set(idKey(entry.request.id), entry.seq);
    }
    return unknown;
  }

  /** The server does not acknowledge (an older one): nothing is kept. */
  clear(): void {
    this.entries = [];
    this.requests.clear();
  }

  private dropThrough(seq: number): void {
    let n = 0;
    while (n < this.entries.length && this.entries[n]!.seq <= seq) {
      const { request } = this.entries[n]!;
      if (request) this.requests.delete(idKey(request.id));
      n++;
    }
    if (n > 0) this.entries = this.entries.slice(n);
  }
}
