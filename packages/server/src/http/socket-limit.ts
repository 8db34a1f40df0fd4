import type { Socket } from "node:net";
import { unavailable } from "./unavailable.js";

/** A socket silent this long may be closed to make room at the cap. */
const SILENT_EVICTION_MS = 1000;

/** What to do with a new socket. */
export type Admission = "serve" | "refuse" | "drop";

/**
 * Caps open client sockets, so that a flood of them (including half-open ones from clients that
 * never authenticate) cannot use up the descriptors agents and the server need.
 *
 * At the cap, the oldest socket that has sent nothing for a second is closed to make room: a
 * client that means it sends its request at once, so silent sockets cannot starve real ones (a
 * younger one may just not have been read yet). With none to close, the new socket is refused
 * with a 503 (`refuse`); past a small overflow kept for those answers, it is closed at once (`drop`).
 */
export class SocketLimit {
  private readonly serving = new Set<Socket>();
  /** Sockets that have sent nothing yet, with when they came, oldest first (Maps iterate in insertion order). */
  private readonly silent = new Map<Socket, number>();
  private readonly refusing = new Set<Socket>();
  private readonly overflow: number;

  constructor(private readonly max: number) {
    this.overflow = Math.max(8, Math.ceil(max / 16));
  }

  admit(socket: Socket): Admission {
    const now = Date.now();
    if (this.serving.size >= this.max) {
      const [oldest, since] = this.silent.entries().next().value ?? [];
      if (oldest && since !== undefined && now - since >= SILENT_EVICTION_MS) {
        this.forget(oldest);
        oldest.destroy();
      }
    }
    if (this.serving.size < this.max) {
      this.serving.add(socket);
      this.silent.set(socket, now);
      socket.once("close", () => this.forget(socket));
      return "serve";
    }
    if (this.refusing.size >= this.overflow) return "drop";
    this.refusing.add(socket);
    socket.once("close", () => this.refusing.delete(socket));
    return "refuse";
  }

  /** The socket sent its first bytes. */
  spoke(socket: Socket): void {
    this.silent.delete(socket);
  }

  private forget(socket: Socket): void {
    this.serving.delete(socket);
    this.silent.delete(socket);
  }

  /**
   * Answers a refused HTTP/1.1 socket after its first bytes (the request head) with a 503 problem
   * and closes it; an HTTP/2 client just sees the connection close and retries.
   */
  refuse(socket: Socket, protocol: "h1" | "h2"): void {
    // No server owns this socket: an ECONNRESET unheard would end the process.
    socket.on("error", () => socket.destroy());
    if (protocol === "h2") {
      socket.destroy();
      return;
    }
    const { problem } = unavailable(
      `The server has its limit of ${this.max} open connections (limits.maxSockets); retry later.`,
      { limit: this.max },
    );
    const body = JSON.stringify(problem);
    socket.end(
      "HTTP/1.1 503 Service Unavailable\r\n" +
        "content-type: application/problem+json\r\n" +
        `content-length: ${Buffer.byteLength(body)}\r\n` +
        "retry-after: 1\r\nconnection: close\r\n\r\n" +
        body,
    );
    // Read (and drop) the rest, so the client's FIN is seen and the socket closes at once; a
    // client that does not close its side must not hold it either.
    socket.resume();
    setTimeout(() => socket.destroy(), 2000).unref();
  }
}
