/**
 * One application replica for the multi-process tests: a separate Node process with its own store on
 * the shared database, driven by the test through `serveWorker` calls.
 */
import type { EventSubscription, StoredEvent } from "@sandbox-agent/session-store";
import { serveWorker } from "@sandbox-agent/testkit";
import { postgresSessionStore, type PostgresSessionStore } from "../src/index.js";

let store: PostgresSessionStore | undefined;
type Mirror = NonNullable<PostgresSessionStore["events"]>;
const received = new Map<string, StoredEvent[]>();
const subscriptions: EventSubscription[] = [];
let errors = 0;

const opened = (): PostgresSessionStore & { events: Mirror } => {
  if (!store?.events) throw new Error("call open first");
  return store as PostgresSessionStore & { events: Mirror };
};

serveWorker({
  open: async (params: { applicationName: string }) => {
    store = await postgresSessionStore({ applicationName: params.applicationName });
  },
  createSession: (params: { id: string }) =>
    opened().sessions.create({ ...params, sandboxKey: "k", agent: "mock" }),
  /** `batches` appends of `size` events each; event data is `{ n }`, n counting from `from`. */
  append: async (params: { sessionId: string; from: number; batches: number; size: number }) => {
    let n = params.from;
    let lastSeq = 0;
    for (let b = 0; b < params.batches; b++) {
      const batch = Array.from({ length: params.size }, () => ({ data: { n: n++ }, eventId: `0.${n}` }));
      ({ lastSeq } = await opened().events.append(params.sessionId, batch));
    }
    return lastSeq;
  },
  subscribe: (params: { sessionId: string; after?: number }) => {
    const list = received.get(params.sessionId) ?? [];
    received.set(params.sessionId, list);
    subscriptions.push(
      opened().events.subscribe(params.sessionId, (batch) => void list.push(...batch), {
        after: params.after ?? 0,
        onError: () => void errors++,
      }),
    );
  },
  /** What a subscriber got: count, and whether seq and data ran 1, 2, 3… without a gap or a repeat. */
  received: (params: { sessionId: string }) => {
    const list = received.get(params.sessionId) ?? [];
    const exact = list.every((e, i) => e.seq === i + 1 && (e.data as { n: number }).n === i + 1);
    return { count: list.length, exact, lastSeq: list.at(-1)?.seq ?? 0, errors };
  },
  close: async () => {
    for (const s of subscriptions) s.close();
    await store?.close();
  },
});
