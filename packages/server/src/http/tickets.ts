import { nodeCrypto } from "../lazy-builtins.js";

/**
 * Short-lived single-use tickets that authenticate one WebSocket upgrade. Browsers cannot send
 * `Authorization` on a WebSocket, and a long-lived token must never travel in a URL: a client with
 * the token asks for a ticket over HTTP and passes it as `?ticket=`, once, within the lifetime.
 */
export class TicketBook {
  private readonly tickets = new Map<string, { subject: string; expiresAt: number }>();

  constructor(private readonly ttlMs: number) {}

  /** A ticket for `subject` (what it opens: a path, a process id). */
  issue(subject: string): { ticket: string; expiresAt: string } {
    const now = Date.now();
    for (const [ticket, entry] of this.tickets) if (entry.expiresAt <= now) this.tickets.delete(ticket);
    const ticket = nodeCrypto().randomBytes(24).toString("base64url");
    const expiresAt = now + this.ttlMs;
    this.tickets.set(ticket, { subject, expiresAt });
    return { ticket, expiresAt: new Date(expiresAt).toISOString() };
  }

  /** Consumes `ticket`: true when it was issued for `subject` and has not expired. */
  redeem(ticket: string, subject: string): boolean {
    const entry = this.tickets.get(ticket);
    if (!entry) return false;
    this.tickets.delete(ticket);
    return entry.subject === subject && entry.expiresAt > Date.now();
  }
}
