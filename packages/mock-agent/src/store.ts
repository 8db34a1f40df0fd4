import { mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync, rmSync } from "node:fs";
import path from "node:path";
import type { StoredSession } from "./session.js";

/**
 * Sessions of this process, optionally mirrored to `<dir>/<sessionId>.json` so that a later
 * mock-agent process (started with the same MOCK_AGENT_STATE_DIR) can load, resume and list them.
 */
export class SessionStore {
  private readonly sessions = new Map<string, StoredSession>();

  constructor(private readonly dir: string | undefined) {
    if (dir) mkdirSync(dir, { recursive: true });
  }

  get(sessionId: string): StoredSession | undefined {
    return this.sessions.get(sessionId) ?? this.readFile(sessionId);
  }

  /** Makes `session` live in this process and persists it. */
  put(session: StoredSession): void {
    this.sessions.set(session.sessionId, session);
    this.save(session);
  }

  /** Forgets the live copy; the file stays so that the session can be loaded again. */
  release(sessionId: string): void {
    this.sessions.delete(sessionId);
  }

  save(session: StoredSession): void {
    if (!this.dir) return;
    const file = this.file(session.sessionId);
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(session));
    renameSync(tmp, file);
  }

  list(): StoredSession[] {
    const all = new Map<string, StoredSession>();
    for (const id of this.fileIds()) {
      const s = this.readFile(id);
      if (s) all.set(id, s);
    }
    for (const s of this.sessions.values()) all.set(s.sessionId, s);
    return [...all.values()].sort((a, b) => b.updatedAt.localeCompare(a.updatedAt));
  }

  remove(sessionId: string): void {
    this.sessions.delete(sessionId);
    if (this.dir) rmSync(this.file(sessionId), { force: true });
  }

  private file(sessionId: string): string {
    // Session ids come from clients (load/resume): keep them from escaping the directory.
    return path.join(this.dir ?? "", `${encodeURIComponent(sessionId)}.json`);
  }

  private fileIds(): string[] {
    if (!this.dir) return [];
    return readdirSync(this.dir)
      .filter((f) => f.endsWith(".json"))
      .map((f) => decodeURIComponent(f.slice(0, -".json".length)));
  }

  private readFile(sessionId: string): StoredSession | undefined {
    if (!this.dir) return undefined;
    try {
      return JSON.parse(readFileSync(this.file(sessionId), "utf8")) as StoredSession;
    } catch {
      return undefined;
    }
  }
}
