#!/usr/bin/env node
// Benchmark of the shared session store on PostgreSQL: events mirrored per second (batched), live
// fan-out latency from one replica process to another, and reattach time by key (local sandboxes,
// and container sandboxes when a container engine and the test image are there); each against a
// baseline measured in the same run on the same server.
//   node bench/fleet.mjs [--quick] [--json] [--no-fsync]
// Default: PostgreSQL's durable settings (every commit waits for the disk). --no-fsync runs without
// (as the tests do), which shows what the store costs when the disk is not the limit. Containers:
// DOCKER_HOST (or the default socket) and `npm run image -w @sandbox-agent/sandbox-docker`.
import { performance } from "node:perf_hooks";
import { rmSync } from "node:fs";
import path from "node:path";
import pg from "pg";
import Docker from "dockerode";
import { createFleet, localProcessSandbox } from "@sandbox-agent/ai-sandbox";
import { dockerSandbox } from "@sandbox-agent/sandbox-docker";
import { SandboxAgentClient } from "sandbox-agent";
import { benchArgs, runMain, startServer } from "./common.mjs";
import { postgresSessionStore } from "@sandbox-agent/session-store-postgres";
import { repoRoot, startPostgres, startWorker, tempDir } from "@sandbox-agent/testkit";

const args = benchArgs(import.meta.url, { quick: { type: "boolean" }, "no-fsync": { type: "boolean" } });
const quick = args.quick;
const asJson = args.json;
const durable = !args["no-fsync"];
const MIRROR_EVENTS = quick ? 50_000 : 200_000;
const BATCH = 500;
const WRITERS = 4;
const LATENCY_SAMPLES = quick ? 500 : 2000;
const REATTACH_SAMPLES = quick ? 20 : 50;
const CONTAINER_SAMPLES = quick ? 3 : 8;
const SDK_EVENTS = quick ? 5_000 : 20_000;
const SDK_ROUNDS = 3;
const IMAGE = process.env.SANDBOX_AGENT_TEST_IMAGE ?? "localhost/sandbox-agent-test:latest";
const log = (...a) => !asJson && console.error(...a);
const now = () => performance.timeOrigin + performance.now();
const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};

/** A streamed agent message chunk as the SDK sees it (~170 bytes of JSON). */
const event = (i) => ({
  type: "update",
  sessionId: "s",
  update: {
    sessionUpdate: "agent_message_chunk",
    content: { type: "text", text: `token ${i} of the answer ` },
  },
  metadata: {},
});

/** Appends `total` events to `sessions` in batches with one writer per session; events/s over all. */
async function mirror(store, sessions, total, batch) {
  const perSession = Math.floor(total / sessions.length);
  const started = performance.now();
  await Promise.all(
    sessions.map(async (id) => {
      for (let done = 0; done < perSession; done += batch) {
        const events = Array.from({ length: Math.min(batch, perSession - done) }, (_, k) => ({
          data: event(done + k),
          eventId: `1.${done + k}`,
        }));
        await store.events.append(id, events);
      }
    }),
  );
  return (perSession * sessions.length) / ((performance.now() - started) / 1000);
}

/** The baseline: the same rows into a bare table (no sequence bookkeeping, no NOTIFY), same batching. */
async function bareInsert(pool, sessions, total, batch) {
  await pool.query(
    "CREATE TABLE IF NOT EXISTS bare_events (session_id text, seq bigint, data json, PRIMARY KEY (session_id, seq))",
  );
  const perSession = Math.floor(total / sessions.length);
  const started = performance.now();
  await Promise.all(
    sessions.map(async (id) => {
      for (let done = 0; done < perSession; done += batch) {
        const data = Array.from({ length: Math.min(batch, perSession - done) }, (_, k) => event(done + k));
        await pool.query(
          "INSERT INTO bare_events SELECT $1, $2 + e.ord, e.value FROM json_array_elements($3::json) WITH ORDINALITY AS e(value, ord)",
          [id, done, JSON.stringify(data)],
        );
      }
    }),
  );
  return (perSession * sessions.length) / ((performance.now() - started) / 1000);
}

/**
 * A streamed turn through the SDK (the mock agent's `chunks N` behind a real server), with the client
 * bound to the store, which mirrors every event as it streams, against the same turn with no store.
 * `streamed`: events/s the client received; `mirrored`: events/s until the mirror held them all.
 */
async function sdkMirror(store) {
  const server = await startServer();
  const turn = async (round, bound) => {
    const sessionId = `sdk-${round}`;
    const client = new SandboxAgentClient({
      baseUrl: server.url,
      agent: "mock",
      autoConnect: false,
      ...(bound ? { store, sessionId, sandboxKey: "bench" } : {}),
    });
    await client.connect();
    const session = await client.newSession({ cwd: "/tmp" });
    const started = performance.now();
    await client.prompt({ sessionId: session.sessionId, prompt: `chunks ${SDK_EVENTS}` });
    const streamedMs = performance.now() - started;
    // turnStarted, the chunks, turnEnded
    while (bound && (await store.sessions.get(sessionId)).lastSeq < SDK_EVENTS + 2)
      await new Promise((resolve) => setTimeout(resolve, 5));
    const mirroredMs = performance.now() - started;
    await client.disconnect();
    return { streamed: SDK_EVENTS / (streamedMs / 1000), mirrored: SDK_EVENTS / (mirroredMs / 1000) };
  };
  try {
    const plain = [];
    const bound = [];
    for (let round = 0; round < SDK_ROUNDS; round++) {
      plain.push((await turn(round, false)).streamed);
      bound.push(await turn(round, true));
    }
    return {
      events: SDK_EVENTS,
      rounds: SDK_ROUNDS,
      plainStreamed: percentile(plain, 50),
      boundStreamed: percentile(
        bound.map((b) => b.streamed),
        50,
      ),
      mirrored: percentile(
        bound.map((b) => b.mirrored),
        50,
      ),
    };
  } finally {
    server.stop();
  }
}

/** Why container sandboxes cannot be measured here, or undefined when they can. */
async function containersMissing() {
  const host = process.env.DOCKER_HOST;
  const docker = new Docker(host?.startsWith("unix://") ? { socketPath: host.slice(7) } : undefined);
  try {
    await docker.ping();
    await docker.getImage(IMAGE).inspect();
    return undefined;
  } catch (error) {
    return `no container engine or no image ${IMAGE} (${error.message})`;
  }
}

/**
 * Container sandboxes created by the other process; this one reattaches by key: while they run
 * (fleet `getOrCreate`: lease, provider `resume` = inspect, token read through the engine, health
 * check, record update), and after the other process stopped them (the container starts again).
 * Baselines: reading the record, and the provider's `resume` alone (no store).
 */
async function containerReattach(store, writer) {
  const options = {
    image: IMAGE,
    network: "host",
    pull: "never",
    labels: { "dev.sandboxagent.bench": String(process.pid) },
  };
  await writer.call("openContainers", { options });
  const fleet = createFleet({ provider: dockerSandbox({ ...options, persistent: true }), store });
  const keys = Array.from({ length: CONTAINER_SAMPLES }, (_, i) => `bench-${process.pid}-c${i}`);
  const timed = async (work) => {
    const started = performance.now();
    const result = await work();
    return [performance.now() - started, result];
  };
  const samples = { lookup: [], providerResume: [], running: [], stopped: [] };
  try {
    for (const key of keys) {
      await writer.call("createContainer", { key });
      samples.lookup.push((await timed(() => store.sandboxes.get(key)))[0]);
      const [direct, instance] = await timed(() => fleet.provider.resume({ id: key, env: {} }));
      samples.providerResume.push(direct);
      await instance.dispose();
      const [ms, got] = await timed(() => fleet.getOrCreate(key));
      if (got.outcome !== "resumed") throw new Error(`${key} was ${got.outcome}, expected resumed`);
      samples.running.push(ms);
      await got.instance.dispose();
    }
    for (const key of keys) {
      await writer.call("stopContainer", { key });
      const [ms, got] = await timed(() => fleet.getOrCreate(key));
      samples.stopped.push(ms);
      await got.instance.dispose();
    }
  } finally {
    for (const key of keys) await fleet.destroy(key).catch(() => undefined);
    await fleet.close();
  }
  const p = (values) => ({ p50: percentile(values, 50), p99: percentile(values, 99) });
  return {
    samples: keys.length,
    lookupP50: percentile(samples.lookup, 50),
    providerResumeMs: p(samples.providerResume),
    runningMs: p(samples.running),
    stoppedMs: p(samples.stopped),
  };
}

async function main() {
  log(`starting a scratch PostgreSQL (${durable ? "fsync and synchronous_commit on" : "fsync off"})…`);
  const settings = { fsync: "on", synchronous_commit: "on", full_page_writes: "on" };
  const cluster = await startPostgres(durable ? { settings } : {});
  const parentDir = tempDir("sandbox-agent-bench-fleet-");
  const writer = startWorker(path.join(repoRoot, "bench/fleet-replica.mjs"), {
    env: { DATABASE_URL: cluster.connectionString },
  });
  try {
    const store = await postgresSessionStore({
      connectionString: cluster.connectionString,
      applicationName: "bench",
    });
    await writer.call("open", { parentDir });

    // ─── Mirror throughput ───
    const sessions = Array.from({ length: WRITERS }, (_, i) => `mirror-${i}`);
    for (const id of [...sessions, "single", "small"])
      await store.sessions.create({ id, sandboxKey: "k", agent: "mock" });
    log(`mirror: ${MIRROR_EVENTS} events, batches of ${BATCH}, ${WRITERS} sessions at once…`);
    const bare = await bareInsert(
      store.pool,
      sessions.map((s) => `bare-${s}`),
      MIRROR_EVENTS,
      BATCH,
    );
    const mirrored = await mirror(store, sessions, MIRROR_EVENTS, BATCH);
    log("mirror: one session, one writer…");
    const single = await mirror(store, ["single"], MIRROR_EVENTS / 4, BATCH);
    log("mirror: batches of 10…");
    const small = await mirror(store, ["small"], MIRROR_EVENTS / 20, 10);
    const stored = (await store.pool.query("SELECT count(*)::int AS n FROM sandbox_agent.session_events"))
      .rows[0].n;

    // ─── Fan-out latency: writer process appends, this process is subscribed ───
    log(`fan-out: ${LATENCY_SAMPLES} single-event appends from another process…`);
    await store.sessions.create({ id: "live", sandboxKey: "k", agent: "mock" });
    const latencies = [];
    let lastSeq = 0;
    let inOrder = true;
    const subscription = store.events.subscribe("live", (batch) => {
      const at = now();
      for (const e of batch) {
        if (e.seq !== lastSeq + 1) inOrder = false;
        lastSeq = e.seq;
        latencies.push(at - e.data.sentAt);
      }
    });
    await new Promise((resolve) => setTimeout(resolve, 500)); // the LISTEN connection is up
    await writer.call("appendPaced", { sessionId: "live", count: LATENCY_SAMPLES, gapMs: 2 });
    while (latencies.length < LATENCY_SAMPLES) await new Promise((resolve) => setTimeout(resolve, 20));
    subscription.close();

    log("fan-out baseline: raw NOTIFY between the same processes…");
    const listener = new pg.Client({ connectionString: cluster.connectionString });
    await listener.connect();
    await listener.query("LISTEN bench_raw");
    const raw = [];
    listener.on("notification", (m) => raw.push(now() - Number(m.payload)));
    await writer.call("notifyPaced", { channel: "bench_raw", count: LATENCY_SAMPLES, gapMs: 2 });
    while (raw.length < LATENCY_SAMPLES) await new Promise((resolve) => setTimeout(resolve, 20));
    await listener.end();

    // ─── Reattach by key from another replica ───
    log(`reattach: ${REATTACH_SAMPLES} keys created by the other process, reattached here…`);
    const fleet = createFleet({ provider: localProcessSandbox({ parentDir }), store });
    const reattach = [];
    const lookup = [];
    for (let i = 0; i < REATTACH_SAMPLES; i++) {
      await writer.call("getOrCreate", { key: `r${i}` });
      let t = performance.now();
      await store.sandboxes.get(`r${i}`);
      lookup.push(performance.now() - t);
      t = performance.now();
      const { outcome } = await fleet.getOrCreate(`r${i}`);
      reattach.push(performance.now() - t);
      if (outcome !== "resumed") throw new Error(`r${i} was ${outcome}, expected resumed`);
    }
    await fleet.close();

    log(`SDK: a turn of ${SDK_EVENTS} events, with and without a store, ${SDK_ROUNDS} rounds…`);
    const sdk = await sdkMirror(store);

    const missing = await containersMissing();
    log(
      missing
        ? `reattach (containers): skipped, ${missing}`
        : `reattach (containers): ${CONTAINER_SAMPLES} sandboxes…`,
    );
    const containers = missing ? { skipped: missing } : await containerReattach(store, writer);
    await store.close();

    const results = {
      node: process.version,
      postgres: durable ? "fsync on, synchronous_commit on" : "fsync off, synchronous_commit off",
      mirror: {
        events: MIRROR_EVENTS,
        batch: BATCH,
        writers: WRITERS,
        eventsPerSecond: mirrored,
        bareInsertPerSecond: bare,
        ratio: mirrored / bare,
        singleWriter: single,
        batchOf10: small,
        stored,
      },
      fanOutMs: {
        p50: percentile(latencies, 50),
        p99: percentile(latencies, 99),
        samples: latencies.length,
        inOrder,
        rawNotify: { p50: percentile(raw, 50), p99: percentile(raw, 99) },
      },
      reattachMs: {
        p50: percentile(reattach, 50),
        p99: percentile(reattach, 99),
        lookupP50: percentile(lookup, 50),
      },
      sdkMirror: sdk,
      containerReattachMs: containers,
    };
    if (asJson) return console.log(JSON.stringify(results, null, 2));
    const f = (n, d = 2) => n.toFixed(d);
    const signed = (n) => (n < 0 ? `−${f(-n)}` : `+${f(n)}`);
    const expected = MIRROR_EVENTS + MIRROR_EVENTS / 4 + MIRROR_EVENTS / 20;
    console.log(`
| metric | baseline | session store | ratio / overhead | target |
| --- | --- | --- | --- | --- |
| events mirrored/s (${WRITERS} sessions, batches of ${BATCH}) | ${f(bare, 0)} (bare INSERT) | ${f(mirrored, 0)} | ${f(results.mirror.ratio * 100, 1)} % | ≥ 50,000/s |
| events mirrored/s (1 session, batches of ${BATCH}) | | ${f(single, 0)} | | |
| events mirrored/s (1 session, batches of 10) | | ${f(small, 0)} | | |
| events stored / expected | | ${stored} / ${expected} | | equal |
| SDK turn of ${sdk.events} events, streamed/s by the client | ${f(sdk.plainStreamed, 0)} (no store) | ${f(sdk.boundStreamed, 0)} (mirroring) | ${f((sdk.boundStreamed / sdk.plainStreamed) * 100, 1)} % | |
| SDK turn, events mirrored/s (until the store holds them all) | | ${f(sdk.mirrored, 0)} | | keeps pace |
| fan-out replica → replica p50 (ms) | ${f(results.fanOutMs.rawNotify.p50)} (raw NOTIFY) | ${f(results.fanOutMs.p50)} | ${signed(results.fanOutMs.p50 - results.fanOutMs.rawNotify.p50)} ms | ≤ 5 ms |
| fan-out replica → replica p99 (ms) | ${f(results.fanOutMs.rawNotify.p99)} (raw NOTIFY) | ${f(results.fanOutMs.p99)} | ${signed(results.fanOutMs.p99 - results.fanOutMs.rawNotify.p99)} ms | |
| fan-out delivered in order, once | | ${inOrder && latencies.length === LATENCY_SAMPLES ? "yes" : "NO"} (${latencies.length}) | | yes |
| reattach by key from another replica p50 / p99 (ms) | ${f(results.reattachMs.lookupP50)} (record lookup) | ${f(results.reattachMs.p50)} / ${f(results.reattachMs.p99)} | | |
${
  containers.skipped
    ? `| reattach to container sandboxes | skipped: ${containers.skipped} | | | |`
    : `| reattach by key, running container p50 / p99 (ms, ${containers.samples}) | ${f(containers.lookupP50)} (record lookup) · ${f(containers.providerResumeMs.p50)} (provider resume alone) | ${f(containers.runningMs.p50)} / ${f(containers.runningMs.p99)} | ${signed(containers.runningMs.p50 - containers.providerResumeMs.p50)} ms for the fleet | |
| reattach by key, stopped container (started again) p50 / p99 (ms) | | ${f(containers.stoppedMs.p50)} / ${f(containers.stoppedMs.p99)} | | |`
}
`);
  } finally {
    await writer.call("close").catch(() => undefined);
    await writer.stop();
    await cluster.stop();
    rmSync(parentDir, { recursive: true, force: true });
  }
}

runMain(main);
