import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { after, describe, it } from "node:test";
import { waitFor } from "@sandbox-agent/testkit";
import {
  createSecrets,
  defineSandbox,
  defineWorkspace,
  localProcessSandbox,
  type SandboxDefinition,
} from "../src/index.js";
import { groupSurvivors, readText, runIn } from "./helpers.js";

const sandboxes: SandboxDefinition[] = [];
function sandbox(options: Parameters<typeof defineSandbox>[0]): SandboxDefinition {
  const definition = defineSandbox(options);
  sandboxes.push(definition);
  return definition;
}
after(() => Promise.all(sandboxes.map((s) => s.dispose())));

describe("local-process sandbox", { timeout: 30_000 }, () => {
  it("scrubs the host env: undeclared host variables never reach sandbox processes", async () => {
    process.env["SECRET_HOST_VAR"] = "host-secret-value";
    try {
      const instance = await sandbox({
        id: "env-scrub",
        provider: localProcessSandbox(),
        workspace: defineWorkspace({ env: { PLAIN: "p" }, secrets: createSecrets({ API_TOKEN: "tok-123" }) }),
      }).start();
      const { stdout, code } = await runIn(instance, "env", { PER_SPAWN: "x" });
      assert.equal(code, 0);
      const env = new Map(
        stdout
          .trim()
          .split("\n")
          .map((line) => line.split(/=(.*)/s).slice(0, 2) as [string, string]),
      );
      assert.equal(env.get("SECRET_HOST_VAR"), undefined);
      assert.equal(env.get("API_TOKEN"), "tok-123");
      assert.equal(env.get("PLAIN"), "p");
      assert.equal(env.get("PER_SPAWN"), "x");
      assert.equal(env.get("HOME"), `${instance.workdir.replace(/workspace$/, "home")}`);
      assert.equal(env.get("PATH"), process.env["PATH"]);
      const allowed = /^(PATH|HOME|TMPDIR|LANG|TERM|LC_.*|PWD|SHLVL|_|OLDPWD|API_TOKEN|PLAIN|PER_SPAWN)$/;
      assert.deepEqual(
        [...env.keys()].filter((name) => !allowed.test(name)),
        [],
      );
      assert.equal(instance.env["API_TOKEN"], "tok-123");
    } finally {
      delete process.env["SECRET_HOST_VAR"];
    }
  });

  it("passes host variables only when named, and the host HOME only when asked", async () => {
    process.env["NAMED_HOST_VAR"] = "named";
    try {
      const instance = await sandbox({
        id: "env-inherit",
        provider: localProcessSandbox({ inheritEnv: ["NAMED_HOST_VAR"], home: "host" }),
      }).start();
      const { stdout } = await runIn(instance, 'echo "$NAMED_HOST_VAR|$HOME"');
      assert.equal(stdout, `named|${process.env["HOME"]}\n`);
    } finally {
      delete process.env["NAMED_HOST_VAR"];
    }
  });

  it("kill() takes the whole process group down, background children included", async () => {
    const instance = await sandbox({ id: "group-kill", provider: localProcessSandbox() }).start();
    const proc = await instance.spawn("sleep 100 & sleep 100");
    const pgid = proc.pid as number;
    for (
      let i = 0;
      i < 100 && (await groupSurvivors(pgid)).filter((p) => p.startsWith("sleep")).length < 2;
      i++
    ) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal((await groupSurvivors(pgid)).filter((p) => p.startsWith("sleep")).length, 2);
    await proc.kill();
    assert.deepEqual(await groupSurvivors(pgid), []);
    assert.notEqual((await proc.exited).signal, null);
  });

  it("dispose() kills groups whose leader already exited and removes the temp root", async () => {
    const definition = sandbox({ id: "dispose-orphans", provider: localProcessSandbox() });
    const instance = await definition.start();
    const proc = await instance.spawn("sleep 100 & exit 0");
    assert.equal((await proc.exited).code, 0);
    assert.equal((await groupSurvivors(proc.pid as number)).length, 1);
    await definition.dispose();
    // SIGKILL is sent by dispose(); the kernel ends the process when it next runs (later on a busy machine).
    await waitFor(async () => (await groupSurvivors(proc.pid as number)).length === 0, 10_000, "group gone");
    assert.equal(existsSync(instance.workdir), false);
    await assert.rejects(instance.spawn("true"), /disposed/);
    const fresh = await definition.start();
    assert.notEqual(fresh.workdir, instance.workdir, "a disposed instance is not reused");
    await fresh.dispose();
    assert.notEqual((await definition.start()).workdir, fresh.workdir, "instance.dispose() also forgets it");
  });

  it("keeps a stderr tail and reports the exit code", async () => {
    const instance = await sandbox({ id: "stderr", provider: localProcessSandbox() }).start();
    const proc = await instance.spawn("echo out; echo oops >&2; exit 3");
    assert.equal(await readText(proc.stdout), "out\n");
    assert.equal((await proc.exited).code, 3);
    assert.equal(proc.stderrTail(), "oops\n");
  });

  it("files API reads, writes, lists and refuses paths outside the sandbox", async () => {
    const instance = await sandbox({ id: "files", provider: localProcessSandbox() }).start();
    await instance.files.writeFile("a/b/c.txt", "hello");
    assert.equal(Buffer.from((await instance.files.readFile("a/b/c.txt")) ?? []).toString(), "hello");
    assert.equal(await instance.files.readFile("missing.txt"), undefined);
    assert.deepEqual(await instance.files.list("a"), [
      { path: "b", type: "directory" },
      { path: "b/c.txt", type: "file" },
    ]);
    await instance.files.remove("a");
    assert.deepEqual(await instance.files.list("."), []);
    await assert.rejects(instance.files.readFile("../../etc/passwd"), /escapes/);
    await assert.rejects(instance.files.writeFile("/etc/x", "no"), /escapes/);
  });

  it("spawn in a missing cwd fails with a clear error", async () => {
    const instance = await sandbox({ id: "bad-cwd", provider: localProcessSandbox() }).start();
    await assert.rejects(instance.spawn("true", { cwd: "does/not/exist" }), /spawn failed/);
  });
});

describe("host process exit", { timeout: 30_000 }, () => {
  const fixture = new URL("./fixtures/exit-without-dispose.js", import.meta.url).pathname;

  /** Runs the fixture, waits for its first line, then lets `stop` end it; resolves the line and exit. */
  async function runFixture(
    mode: "exit" | "signal",
  ): Promise<{ pgid: number; workdir: string; signal: string | null }> {
    const child = spawn(process.execPath, [fixture, mode], { stdio: ["ignore", "pipe", "inherit"] });
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    const exited = new Promise<string | null>((resolve) =>
      child.once("exit", (_code, signal) => resolve(signal)),
    );
    const [line] = (await once(createInterface({ input: child.stdout }), "line")) as [string];
    if (mode === "signal") child.kill("SIGTERM");
    const signal = await exited;
    clearTimeout(timer);
    return { ...(JSON.parse(line) as { pgid: number; workdir: string }), signal };
  }

  for (const mode of ["exit", "signal"] as const) {
    it(`${mode === "exit" ? "process.exit()" : "SIGTERM"} without dispose() kills sandbox groups and removes the temp root`, async () => {
      const { pgid, workdir, signal } = await runFixture(mode);
      // The fixture sent SIGKILL before exiting; on a busy machine the group may take a moment to end.
      await waitFor(async () => (await groupSurvivors(pgid)).length === 0, 10_000, "group gone");
      assert.equal(existsSync(workdir), false);
      assert.equal(signal, mode === "signal" ? "SIGTERM" : null, "default signal behaviour kept");
    });
  }
});
