import { repoRoot, tempDir, waitFor } from "@sandbox-agent/testkit";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { appendFileSync, existsSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import {
  CapacityTimeoutError,
  SandboxBusyError,
  createFleet,
  localProcessSandbox,
  type Fleet,
  type ProviderInstance,
} from "../src/index.js";
import { groupSurvivors, runIn } from "./helpers.js";

const parentDir = tempDir("sandbox-agent-fleet-");
const fleets: Fleet[] = [];
after(async () => {
  await Promise.all(fleets.map((fleet) => fleet.close()));
  rmSync(parentDir, { recursive: true, force: true });
});

function fleet(options: Omit<Parameters<typeof createFleet>[0], "provider"> = {}): Fleet {
  const made = createFleet({ provider: localProcessSandbox({ parentDir }), ...options });
  fleets.push(made);
  return made;
}

/** Starts `sleep` inside the sandbox and returns its process group. */
async function sleeper(instance: ProviderInstance): Promise<number> {
  const proc = await instance.spawn("sleep 300");
  return proc.pid!;
}

describe("local-process provider, persistent mode", { timeout: 60_000 }, () => {
  const provider = localProcessSandbox({ parentDir });

  it("create refuses an existing sandbox; resume reopens it with its files; destroy removes it", async () => {
    const created = await provider.create({ id: "p1", env: {} });
    await created.files.writeFile("notes.txt", "kept");
    await assert.rejects(
      provider.create({ id: "p1", env: {} }),
      /already exists .*resume it, or destroy it first/,
    );
    const resumed = await provider.resume({ id: "p1", env: { SECRET: "s" } });
    assert.ok(resumed);
    assert.equal(resumed.providerId, created.providerId);
    assert.equal(new TextDecoder().decode(await resumed.files.readFile("notes.txt")), "kept");
    assert.equal((await runIn(resumed, "echo $SECRET")).stdout, "s\n");
    assert.equal(await provider.resume({ id: "never-made", env: {} }), undefined);
    await provider.destroy("p1");
    assert.equal(existsSync(created.providerId!), false);
    assert.equal(await provider.resume({ id: "p1", env: {} }), undefined);
    await provider.destroy("p1");
  });

  it("stop kills the sandbox's process groups from another process, and nothing else", async () => {
    const instance = await provider.create({ id: "p2", env: {} });
    const pgid = await sleeper(instance);
    // A group of someone else under a recycled-looking record must survive: its start time differs.
    const bystander = spawn("sleep", ["300"], { detached: true, stdio: "ignore" });
    try {
      const groups = path.join(instance.providerId!, "process-groups");
      const recorded = readFileSync(groups, "utf8");
      assert.match(recorded, new RegExp(`^${pgid} \\d+\\n$`));
      appendFileSync(groups, `${bystander.pid} 1\n`);
      const script = `import("${path.join(repoRoot, "packages/ai-sandbox/dist/src/index.js")}").then((m) =>
        m.localProcessSandbox({ parentDir: ${JSON.stringify(parentDir)} }).stop("p2"))`;
      const other = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: "inherit" });
      assert.equal((await new Promise((resolve) => other.once("exit", resolve))) as number, 0);
      assert.deepEqual(await groupSurvivors(pgid), []);
      assert.equal((await groupSurvivors(bystander.pid!)).length, 1, "an unrelated group is left alone");
    } finally {
      bystander.kill("SIGKILL");
      await provider.destroy("p2");
    }
  });
});

describe("fleet (in-memory store)", { timeout: 60_000 }, () => {
  it("getOrCreate creates once, then reattaches; records status, provider id and activity", async () => {
    const f = fleet();
    const first = await f.getOrCreate("m1", { metadata: { chat: "c-1" } });
    assert.equal(first.outcome, "created");
    assert.equal(first.record.status, "running");
    assert.equal(first.record.providerId, first.instance.providerId);
    assert.deepEqual(first.record.metadata, { chat: "c-1" });
    assert.equal(first.record.lease, null);
    const again = await f.getOrCreate("m1");
    assert.equal(again.outcome, "resumed");
    assert.equal(again.instance.workdir, first.instance.workdir);
    assert.equal(await f.destroy("m1"), true);
    assert.equal(await f.store.sandboxes.get("m1"), undefined);
    assert.equal(await f.destroy("m1"), false);
  });

  it("concurrent getOrCreate of one key creates one sandbox", async () => {
    const f = fleet();
    const results = await Promise.all(Array.from({ length: 8 }, () => f.getOrCreate("m2")));
    assert.deepEqual(results.filter((r) => r.outcome === "created").length, 1);
    assert.equal(new Set(results.map((r) => r.record.providerId)).size, 1);
    await f.destroy("m2");
  });

  it("holds maxLive: the next create waits in line and is served when a sandbox stops", async () => {
    const f = fleet({ maxLive: 1 });
    await f.getOrCreate("m3");
    let served = false;
    const waiting = f.getOrCreate("m4").then((r) => ((served = true), r));
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(served, false, "a second live sandbox would exceed maxLive");
    assert.equal(await f.stop("m3"), true);
    assert.equal((await waiting).outcome, "created");
    assert.equal((await f.store.sandboxes.get("m3"))?.status, "stopped");
    await Promise.all([f.destroy("m3"), f.destroy("m4")]);
  });

  it("a full fleet answers with CapacityTimeoutError after waitTimeoutMs, and an abort ends the wait", async () => {
    const f = fleet({ maxLive: 1, waitTimeoutMs: 300 });
    await f.getOrCreate("m5");
    const started = Date.now();
    const error = await f.getOrCreate("m6").then(
      () => assert.fail("should have timed out"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof CapacityTimeoutError);
    assert.match(error.message, /no free slot for a "local-process" sandbox after \d+ ms: 1 of 1 are live/);
    assert.match(error.message, /raise maxLive, or retry later/);
    assert.ok(Date.now() - started >= 300);
    assert.equal(await f.store.sandboxes.get("m6"), undefined, "the never-created record is gone");
    const controller = new AbortController();
    const aborted = f.getOrCreate("m7", { signal: controller.signal });
    setTimeout(() => controller.abort(new Error("user went away")), 100);
    await assert.rejects(aborted, /user went away/);
    await f.destroy("m5");
  });

  it("a key busy with another owner gives SandboxBusyError after waitTimeoutMs", async () => {
    const f = fleet({ waitTimeoutMs: 200 });
    await f.store.sandboxes.acquire("m8", {
      owner: "someone-else",
      ttlMs: 60_000,
      provider: "local-process",
    });
    await assert.rejects(f.getOrCreate("m8"), (e: unknown) => {
      assert.ok(e instanceof SandboxBusyError);
      assert.match(e.message, /sandbox "m8" stayed busy for \d+ ms \(held by someone-else/);
      return true;
    });
  });

  it("the idle reaper stops idle sandboxes (their processes die, files stay) or destroys them", async () => {
    const stopper = fleet({ idle: { ttlMs: 200, intervalMs: 50 } });
    const { instance } = await stopper.getOrCreate("m9");
    await instance.files.writeFile("work.txt", "w");
    const pgid = await sleeper(instance);
    await waitFor(
      async () => (await stopper.store.sandboxes.get("m9"))?.status === "stopped",
      10_000,
      "reaped",
    );
    assert.deepEqual(await groupSurvivors(pgid), []);
    const back = await stopper.getOrCreate("m9");
    assert.equal(back.outcome, "resumed");
    assert.equal(new TextDecoder().decode(await back.instance.files.readFile("work.txt")), "w");

    const destroyer = fleet({ idle: { ttlMs: 200, action: "destroy", intervalMs: 60_000 } });
    const doomed = await destroyer.getOrCreate("m10");
    await waitFor(async () => (await destroyer.reap()).reaped.includes("m10"), 10_000, "destroyed");
    assert.equal(await destroyer.store.sandboxes.get("m10"), undefined);
    assert.equal(existsSync(doomed.instance.providerId!), false);
    await stopper.destroy("m9");
  });

  it("a touched sandbox is not reaped", async () => {
    const f = fleet({ idle: { ttlMs: 400, intervalMs: 60_000 } });
    await f.getOrCreate("m11");
    for (let i = 0; i < 6; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      await f.touch("m11");
      assert.deepEqual((await f.reap()).reaped, []);
    }
    await f.destroy("m11");
  });

  it("a new record for an orphaned sandbox (the store forgot it) adopts it instead of failing", async () => {
    const provider = localProcessSandbox({ parentDir });
    const orphan = await provider.create({ id: "m12", env: {} });
    await orphan.files.writeFile("left.txt", "behind");
    const f = fleet();
    const adopted = await f.getOrCreate("m12");
    assert.equal(adopted.outcome, "resumed");
    assert.equal(Buffer.from((await adopted.instance.files.readFile("left.txt"))!).toString(), "behind");
    await f.destroy("m12");
  });
});
