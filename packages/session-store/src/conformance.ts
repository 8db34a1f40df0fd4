/**
 * The behaviour every `SessionStore` driver must have, as `node:test` tests. A driver's test file
 * calls `sessionStoreConformance("my driver", () => openMyStore())`; each test gets a fresh store
 * (`open` may return the same database, the tests use unique keys).
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, it } from "node:test";
import { LeaseLostError, SessionExistsError, UnknownSessionError } from "./errors.js";
import type { EventMirror, SessionStore, StoredEvent } from "./types.js";

type Truthy<T> = Exclude<T, false | null | undefined | 0 | "">;

async function until<T>(check: () => T | Promise<T>, what: string, timeoutMs = 10_000): Promise<Truthy<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as Truthy<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const unique = (prefix: string): string => `${prefix}-${randomUUID().slice(0, 8)}`;

/** Registers the conformance tests for a driver; `open` makes a store, closed after each test. */
export function sessionStoreConformance(name: string, open: () => Promise<SessionStore>): void {
  const withStore = (body: (store: SessionStore) => Promise<void>) => async () => {
    const store = await open();
    try {
      await body(store);
    } finally {
      await store.close();
    }
  };

  describe(`${name}: sandboxes`, () => {
    it(
      "acquire inserts a pending record once; a second owner waits for the lease",
      withStore(async (store) => {
        const key = unique("sb");
        const first = await store.sandboxes.acquire(key, { owner: "a", ttlMs: 30_000, provider: "p" });
        assert.equal(first?.status, "pending");
        assert.equal(first?.provider, "p");
        assert.equal(first?.lease?.owner, "a");
        assert.equal(
          await store.sandboxes.acquire(key, { owner: "b", ttlMs: 30_000, provider: "p" }),
          undefined,
        );
        assert.equal((await store.sandboxes.acquire(key, { owner: "a", ttlMs: 30_000 }))?.lease?.owner, "a");
        const released = await store.sandboxes.release(key, "a", { status: "running", providerId: "id-1" });
        assert.equal(released.lease, null);
        const second = await store.sandboxes.acquire(key, { owner: "b", ttlMs: 30_000, provider: "p" });
        assert.equal(second?.status, "running");
        assert.equal(second?.providerId, "id-1");
      }),
    );

    it(
      "of many owners acquiring one key at once, exactly one gets it",
      withStore(async (store) => {
        const key = unique("race");
        const owners = Array.from({ length: 20 }, (_, i) => `owner-${i}`);
        const results = await Promise.all(
          owners.map((owner) => store.sandboxes.acquire(key, { owner, ttlMs: 30_000, provider: "p" })),
        );
        assert.equal(results.filter(Boolean).length, 1);
        assert.equal((await store.sandboxes.list()).filter((r) => r.key === key).length, 1);
      }),
    );

    it(
      "an expired lease can be taken over; the old holder's changes then fail with LeaseLostError",
      withStore(async (store) => {
        const key = unique("expire");
        assert.ok(await store.sandboxes.acquire(key, { owner: "a", ttlMs: 1, provider: "p" }));
        const taken = await until(
          () => store.sandboxes.acquire(key, { owner: "b", ttlMs: 30_000 }),
          "the expired lease to be taken",
        );
        assert.equal(taken.lease?.owner, "b");
        await assert.rejects(store.sandboxes.update(key, "a", { status: "running" }), LeaseLostError);
        await assert.rejects(store.sandboxes.release(key, "a"), LeaseLostError);
        await assert.rejects(store.sandboxes.remove(key, "a"), LeaseLostError);
        assert.equal(await store.sandboxes.renew(key, "a", 30_000), false);
        assert.equal(await store.sandboxes.renew(key, "b", 30_000), true);
      }),
    );

    it(
      "acquire without a provider leases only existing records, and honours status and idleness",
      withStore(async (store) => {
        const key = unique("cond");
        assert.equal(await store.sandboxes.acquire(key, { owner: "a", ttlMs: 30_000 }), undefined);
        await store.sandboxes.acquire(key, { owner: "a", ttlMs: 30_000, provider: "p" });
        await store.sandboxes.release(key, "a", { status: "running", touch: true });
        const idle = { owner: "r", ttlMs: 30_000, status: ["running"] as const, idleForMs: 60_000 };
        assert.equal(await store.sandboxes.acquire(key, idle), undefined, "not idle for a minute yet");
        assert.equal(
          await store.sandboxes.acquire(key, { ...idle, status: ["stopped"], idleForMs: 0 }),
          undefined,
        );
        const reaped = await store.sandboxes.acquire(key, { ...idle, idleForMs: 0 });
        assert.equal(reaped?.lease?.owner, "r");
      }),
    );

    it(
      "update, touch, list filters and remove",
      withStore(async (store) => {
        const provider = unique("prov");
        const [a, b] = [unique("a"), unique("b")];
        for (const key of [a, b]) await store.sandboxes.acquire(key, { owner: "o", ttlMs: 30_000, provider });
        const updated = await store.sandboxes.update(a, "o", {
          status: "running",
          endpoint: "http://127.0.0.1:1",
          metadata: { chat: "c1", n: 1 },
        });
        assert.deepEqual(updated.metadata, { chat: "c1", n: 1 });
        assert.equal(updated.endpoint, "http://127.0.0.1:1");
        await store.sandboxes.release(a, "o");
        const before = (await store.sandboxes.get(a))!.lastActiveAt;
        await until(
          async () =>
            (await store.sandboxes.touch(a)) && (await store.sandboxes.get(a))!.lastActiveAt > before,
          "touch",
        );
        assert.equal(await store.sandboxes.touch(unique("missing")), false);
        const keys = async (options: Parameters<SessionStore["sandboxes"]["list"]>[0]) =>
          (await store.sandboxes.list({ provider, ...options })).map((r) => r.key).sort();
        assert.deepEqual(await keys({}), [a, b].sort());
        assert.deepEqual(await keys({ status: ["running"] }), [a]);
        assert.deepEqual(await keys({ status: ["pending", "stopped"] }), [b]);
        assert.deepEqual(await keys({ idleForMs: 3_600_000 }), []);
        assert.deepEqual(await keys({ leaseExpired: true }), []);
        await store.sandboxes.remove(b, "o");
        assert.equal(await store.sandboxes.get(b), undefined);
      }),
    );

    it(
      "capacity admission is first come, first served, and holds the limit",
      withStore(async (store) => {
        const provider = unique("cap");
        const keys = [unique("k1"), unique("k2"), unique("k3")];
        const tickets: number[] = [];
        for (const key of keys) {
          await store.sandboxes.acquire(key, { owner: key, ttlMs: 30_000, provider });
          tickets.push(await store.sandboxes.enqueue(provider, key, 30_000));
        }
        const admit = (i: number) =>
          store.sandboxes.admit({
            key: keys[i]!,
            owner: keys[i]!,
            ticket: tickets[i]!,
            provider,
            limit: 2,
            ttlMs: 30_000,
          });
        assert.deepEqual(
          await admit(1),
          { admitted: false, live: 0, ahead: 1 },
          "the second waits for the first",
        );
        assert.equal((await admit(0)).admitted, true);
        assert.equal((await store.sandboxes.get(keys[0]!))?.status, "starting");
        assert.equal((await admit(1)).admitted, true);
        assert.deepEqual(await admit(2), { admitted: false, live: 2, ahead: 0 }, "the limit holds");
        await store.sandboxes.release(keys[0]!, keys[0]!, { status: "stopped" });
        assert.equal((await admit(2)).admitted, true);
        assert.equal((await store.sandboxes.list({ provider, status: ["starting"] })).length, 2);
      }),
    );

    it(
      "an abandoned or expired ticket does not block the queue",
      withStore(async (store) => {
        const provider = unique("queue");
        const [gone, expired, waiting] = [unique("g"), unique("e"), unique("w")];
        for (const key of [gone, expired, waiting]) {
          await store.sandboxes.acquire(key, { owner: key, ttlMs: 30_000, provider });
        }
        const goneTicket = await store.sandboxes.enqueue(provider, gone, 30_000);
        await store.sandboxes.enqueue(provider, expired, 1);
        const ticket = await store.sandboxes.enqueue(provider, waiting, 30_000);
        await store.sandboxes.dequeue(goneTicket);
        const result = await until(async () => {
          const r = await store.sandboxes.admit({
            key: waiting,
            owner: waiting,
            ticket,
            provider,
            limit: 1,
            ttlMs: 30_000,
          });
          return r.admitted && r;
        }, "the expired ticket to stop blocking");
        assert.equal(result.ahead, 0);
      }),
    );

    it(
      "watch reports changes",
      withStore(async (store) => {
        const key = unique("watch");
        const seen: string[] = [];
        const stop = store.sandboxes.watch((change) => seen.push(change.key));
        try {
          // A hint, which a shared store may only start delivering once its listener is up: change
          // the record until one arrives.
          await until(async () => {
            await store.sandboxes.acquire(key, { owner: "o", ttlMs: 30_000, provider: "p" });
            await store.sandboxes.release(key, "o", { status: "stopped" });
            await new Promise((resolve) => setTimeout(resolve, 50));
            return seen.includes(key);
          }, "a change notification");
        } finally {
          stop();
        }
      }),
    );
  });

  describe(`${name}: sessions`, () => {
    it(
      "create, get, list by sandbox, update, delete",
      withStore(async (store) => {
        const [id, other, key] = [unique("s"), unique("s"), unique("sb")];
        const created = await store.sessions.create({
          id,
          sandboxKey: key,
          agent: "mock",
          metadata: { title: "t" },
        });
        assert.equal(created.connectionId, null);
        assert.equal(created.lastSeq, 0);
        await assert.rejects(
          store.sessions.create({ id, sandboxKey: key, agent: "mock" }),
          SessionExistsError,
        );
        await store.sessions.create({ id: other, sandboxKey: unique("sb"), agent: "mock" });
        const updated = await store.sessions.update(id, {
          connectionId: "c-1",
          agentSessionId: "a-1",
          lastEventId: "1.5",
        });
        assert.equal(updated.connectionId, "c-1");
        assert.deepEqual(updated.metadata, { title: "t" });
        assert.deepEqual(await store.sessions.get(id), updated);
        assert.deepEqual(
          (await store.sessions.list({ sandboxKey: key })).map((s) => s.id),
          [id],
        );
        await assert.rejects(
          store.sessions.update(unique("missing"), { agentSessionId: "x" }),
          UnknownSessionError,
        );
        await store.sessions.delete(id);
        assert.equal(await store.sessions.get(id), undefined);
        await store.sessions.delete(id);
      }),
    );
  });

  describe(`${name}: event mirror`, () => {
    const mirrorOf = (store: SessionStore): EventMirror => {
      assert.ok(store.events, "this driver has no event mirror");
      return store.events;
    };

    it(
      "appends in order with gapless sequence numbers, reads by cursor, tracks lastEventId",
      withStore(async (store) => {
        const events = mirrorOf(store);
        const id = unique("ev");
        await store.sessions.create({ id, sandboxKey: "k", agent: "mock" });
        assert.deepEqual(await events.append(id, [{ data: { n: 1 } }, { data: "two", eventId: "0.2" }]), {
          firstSeq: 1,
          lastSeq: 2,
        });
        assert.deepEqual(await events.append(id, [{ data: [3] }, { data: null }]), {
          firstSeq: 3,
          lastSeq: 4,
        });
        const all = await events.read(id);
        assert.deepEqual(
          all.map((e) => [e.seq, e.data, e.eventId]),
          [
            [1, { n: 1 }, null],
            [2, "two", "0.2"],
            [3, [3], null],
            [4, null, null],
          ],
        );
        assert.deepEqual(
          (await events.read(id, { after: 1, limit: 2 })).map((e) => e.seq),
          [2, 3],
        );
        const session = await store.sessions.get(id);
        assert.equal(session?.lastEventId, "0.2");
        assert.equal(session?.lastSeq, 4);
        // A resume point held back before events that must be seen again after a takeover.
        await events.append(id, [{ data: 5, eventId: "0.5" }], { lastEventId: "0.4" });
        assert.equal((await store.sessions.get(id))?.lastEventId, "0.4");
        assert.equal((await events.read(id, { after: 4 }))[0]?.eventId, "0.5");
        await events.append(id, [{ data: 6, eventId: "0.6" }]);
        assert.equal((await store.sessions.get(id))?.lastEventId, "0.6");
        await assert.rejects(events.append(unique("missing"), [{ data: 1 }]), UnknownSessionError);
      }),
    );

    it(
      "a subscriber gets the history, then every live event once and in order, until it closes",
      withStore(async (store) => {
        const events = mirrorOf(store);
        const id = unique("sub");
        await store.sessions.create({ id, sandboxKey: "k", agent: "mock" });
        await events.append(id, [{ data: 1 }, { data: 2 }]);
        const seen: StoredEvent[] = [];
        const fromStart = events.subscribe(id, (batch) => void seen.push(...batch));
        const tail: number[] = [];
        const fromTwo = events.subscribe(id, (batch) => void tail.push(...batch.map((e) => e.seq)), {
          after: 2,
        });
        for (let i = 3; i <= 50; i += 4) {
          await events.append(
            id,
            [i, i + 1, i + 2, i + 3].map((n) => ({ data: n })),
          );
        }
        await until(() => seen.length >= 50, "50 events");
        assert.deepEqual(
          seen.map((e) => e.data),
          Array.from({ length: 50 }, (_, i) => i + 1),
        );
        assert.deepEqual(
          seen.map((e) => e.seq),
          Array.from({ length: 50 }, (_, i) => i + 1),
        );
        await until(() => tail.length >= 48, "48 events after the cursor");
        assert.deepEqual(
          tail,
          Array.from({ length: 48 }, (_, i) => i + 3),
        );
        assert.equal(fromStart.cursor, 50);
        fromStart.close();
        fromTwo.close();
        await events.append(id, [{ data: 51 }]);
        const probe: number[] = [];
        const last = events.subscribe(id, (batch) => void probe.push(...batch.map((e) => e.seq)), {
          after: 50,
        });
        await until(() => probe.length === 1, "the probe event");
        last.close();
        assert.equal(seen.length, 50, "a closed subscription delivers nothing more");
      }),
    );
  });
}
