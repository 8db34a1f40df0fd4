import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer as createHttpServer } from "node:http";
import { createServer, type AddressInfo } from "node:net";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, describe, it } from "node:test";
import { bwrapUnavailable, needService, waitFor } from "@sandbox-agent/testkit";
import {
  createSecrets,
  defineSandbox,
  defineWorkspace,
  gitRepository,
  gitSkill,
  localProcessSandbox,
  type LocalProcessSandboxOptions,
  type SandboxDefinition,
  type SandboxInstance,
  type Workspace,
} from "../src/index.js";
import { git, groupSurvivors, makeRepo, pidsRunning, runIn } from "./helpers.js";

const sandboxes: SandboxDefinition[] = [];
function isolated(id: string, options: LocalProcessSandboxOptions = {}, workspace?: Workspace) {
  const definition = defineSandbox({
    id,
    provider: localProcessSandbox({ isolate: "bwrap", ...options }),
    ...(workspace !== undefined ? { workspace } : {}),
  });
  sandboxes.push(definition);
  return definition;
}
after(() => Promise.all(sandboxes.map((s) => s.dispose())));

/**
 * A `sleep` argument no other process of this machine runs with, so its host pids can be found;
 * short enough (1–2 min) that a failing run leaves nothing for long.
 */
function marker(): string {
  return `${60 + Math.floor(Math.random() * 60)}.${process.pid}${Math.floor(Math.random() * 1000)}`;
}

/** Host pids of the two `sleep <marker>` processes once both run. */
function bothSleeping(mark: string): Promise<number[]> {
  return waitFor(
    async () => {
      const pids = await pidsRunning(`sleep ${mark}`);
      return pids.length === 2 ? pids : undefined;
    },
    10_000,
    `two "sleep ${mark}" processes`,
  );
}

const lines = async (instance: SandboxInstance, command: string): Promise<string[]> =>
  (await runIn(instance, command)).stdout.trim().split("\n");

/** Serves the files below `dir` over HTTP on 127.0.0.1, counting requests. */
async function serveFiles(dir: string): Promise<{ url: string; requests(): number; close(): void }> {
  let requests = 0;
  const server = createHttpServer((req, res) => {
    requests++;
    const file = join(dir, decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname));
    if (!file.startsWith(`${dir}/`)) return void res.writeHead(404).end();
    readFile(file).then(
      (data) => res.end(data),
      () => res.writeHead(404).end(),
    );
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, requests: () => requests, close: () => server.close() };
}

const skip = needService("bwrap", bwrapUnavailable());

describe("isolate: bwrap", { skip, timeout: 60_000 }, () => {
  it("keeps the host's home, other users' files and files outside the sandbox out of reach", async () => {
    const outside = await mkdtemp(join(tmpdir(), "host-secret-"));
    const inHome = await mkdtemp(join(homedir(), ".sandbox-bwrap-test-"));
    try {
      await writeFile(join(outside, "secret.txt"), "outside");
      await writeFile(join(inHome, "secret.txt"), "in home");
      const paths = [
        join(outside, "secret.txt"),
        join(inHome, "secret.txt"),
        homedir(),
        "/root",
        "/home",
        "/etc/shadow",
        process.cwd(),
      ];
      const command = paths
        .map((path) => `if cat '${path}' || [ -e '${path}' ]; then echo 'seen ${path}'; fi 2>/dev/null`)
        .join("; ");
      // The same command outside the sandbox sees every path: what bwrap hides is really there.
      const plain = defineSandbox({ id: "bwrap-control", provider: localProcessSandbox() });
      sandboxes.push(plain);
      const seen = (await runIn(await plain.start(), command)).stdout;
      for (const path of paths) assert.match(seen, new RegExp(`seen ${path}\\n`));
      assert.match(seen, /outside/);

      const inside = await runIn(await isolated("bwrap-secrets").start(), command);
      assert.equal(inside.stdout, "");
      assert.equal(inside.code, 0);
    } finally {
      await rm(outside, { recursive: true, force: true });
      await rm(inHome, { recursive: true, force: true });
    }
  });

  it("shows only system directories at the root", async () => {
    const instance = await isolated("bwrap-root").start();
    const entries = await lines(instance, "ls -A /");
    const system = [
      "bin",
      "dev",
      "etc",
      "lib",
      "lib32",
      "lib64",
      "libx32",
      "proc",
      "sbin",
      "tmp",
      "usr",
      "var",
    ];
    // The sandbox's own directories appear at their host paths, under the temp dir.
    const sandboxTop = instance.workdir.split("/")[1];
    assert.deepEqual(
      entries.filter((entry) => !system.includes(entry) && entry !== sandboxTop),
      [],
    );
  });

  it("refuses writes to /usr, /etc and the root; the workspace, HOME, TMPDIR and /tmp are writable", async () => {
    const instance = await isolated("bwrap-writes").start();
    const name = `bwrap-write-probe-${process.pid}`;
    const home = instance.workdir.replace(/workspace$/, "home");
    const tmp = instance.workdir.replace(/workspace$/, "tmp");
    const out = await lines(
      instance,
      `for d in /usr /etc / "$HOME" "$TMPDIR" /tmp .; do touch "$d/${name}" 2>/dev/null && echo "wrote $d" || echo "refused $d"; done`,
    );
    assert.deepEqual(out, [
      "refused /usr",
      "refused /etc",
      "refused /",
      `wrote ${home}`,
      `wrote ${tmp}`,
      "wrote /tmp",
      "wrote .",
    ]);
    assert.equal(existsSync(`/usr/${name}`), false);
    // Without capabilities even root cannot undo the read-only mount.
    const remount = await lines(
      instance,
      `grep CapEff /proc/self/status; mount -o remount,rw,bind /usr 2>/dev/null; touch /usr/${name} 2>/dev/null || echo refused`,
    );
    assert.deepEqual(remount, ["CapEff:\t0000000000000000", "refused"]);
    assert.equal(existsSync(`/usr/${name}`), false);
    assert.notEqual(await instance.files.readFile(name), undefined, "the workspace file is on the host");
    assert.equal(existsSync(join(home, name)), true);
  });

  it("passes only the scrubbed environment: host variables never leak", async () => {
    process.env["SECRET_HOST_VAR"] = "host-secret-value";
    try {
      const instance = await isolated(
        "bwrap-env",
        {},
        defineWorkspace({ secrets: createSecrets({ API_TOKEN: "tok-123" }) }),
      ).start();
      const env = await lines(instance, "env");
      const names = env.map((line) => line.slice(0, line.indexOf("=")));
      assert.ok(env.includes("API_TOKEN=tok-123"));
      const allowed = /^(PATH|HOME|TMPDIR|LANG|TERM|LC_.*|PWD|SHLVL|_|OLDPWD|API_TOKEN)$/;
      assert.deepEqual(
        names.filter((name) => !allowed.test(name)),
        [],
      );
      assert.ok(!env.some((line) => line.includes("host-secret-value")));
    } finally {
      delete process.env["SECRET_HOST_VAR"];
    }
  });

  it("runs each command in its own PID namespace", async () => {
    const [self, ...pids] = await lines(
      await isolated("bwrap-pidns").start(),
      "echo $$; ls /proc | grep -E '^[0-9]+$'",
    );
    assert.equal(self, "2", "pid 1 is bwrap's reaper, the command's shell is 2");
    assert.ok(pids.length <= 4 && pids.every((pid) => Number(pid) < 10), `pids seen: ${pids.join(" ")}`);
  });

  it("kill() gives the command its SIGTERM grace, then nothing of it is left (setsid included)", async () => {
    const instance = await isolated("bwrap-kill").start();
    const mark = marker();
    const proc = await instance.spawn(
      `trap 'echo graceful > "$HOME/term"; exit 0' TERM; setsid sleep ${mark} & sleep ${mark} & wait`,
    );
    await bothSleeping(mark);
    await proc.kill();
    assert.deepEqual(await pidsRunning(`sleep ${mark}`), []);
    assert.deepEqual(await groupSurvivors(proc.pid as number), []);
    assert.equal((await proc.exited).code, 0, "the shell's trap ran and exited");
    assert.equal(await readFile(join(instance.workdir, "../home/term"), "utf8"), "graceful\n");
  });

  it("what a command leaves running dies with it; dispose() kills running commands", async () => {
    const definition = isolated("bwrap-dispose");
    const instance = await definition.start();
    const left = marker();
    const quick = await instance.spawn(`setsid sleep ${left} & sleep ${left} & exit 0`);
    assert.equal((await quick.exited).code, 0);
    assert.deepEqual(await pidsRunning(`sleep ${left}`), []);

    const running = marker();
    const procs = await Promise.all([
      instance.spawn(`setsid sleep ${running} & wait`),
      instance.spawn(`sleep ${running}`),
    ]);
    await bothSleeping(running);
    await definition.dispose();
    assert.deepEqual(await pidsRunning(`sleep ${running}`), []);
    for (const proc of procs) assert.deepEqual(await groupSurvivors(proc.pid as number), []);
    assert.equal(existsSync(instance.workdir), false);
  });

  it("runs workspace setup commands inside the sandbox", async () => {
    const instance = await isolated(
      "bwrap-setup",
      {},
      defineWorkspace({
        setup: ["echo $$ > setup-pid", "touch /usr/setup-probe 2>/dev/null || echo ro > setup-ro"],
      }),
    ).start();
    const read = async (path: string) => Buffer.from((await instance.files.readFile(path)) ?? []).toString();
    assert.equal(await read("setup-pid"), "2\n");
    assert.equal(await read("setup-ro"), "ro\n");
  });

  it("has what git and Node need: the user in /etc/passwd, name resolution, CA certificates", async () => {
    const instance = await isolated("bwrap-tools").start();
    const out = await lines(
      instance,
      [
        "id -un",
        "git init -q && git -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m first && git log --format=%s",
        "getent hosts localhost | cut -d' ' -f1",
        `node -e 'console.log(require("os").userInfo().homedir)'`,
        existsSync("/etc/ssl/certs/ca-certificates.crt")
          ? "head -c 27 /etc/ssl/certs/ca-certificates.crt; echo"
          : "",
      ]
        .filter(Boolean)
        .join("; "),
    );
    const { userInfo } = await import("node:os");
    assert.equal(out[0], userInfo().username);
    assert.equal(out[1], "first");
    assert.match(out[2] ?? "", /^(127\.0\.0\.1|::1)$/);
    assert.equal(out[3], instance.workdir.replace(/workspace$/, "home"));
    if (out[4] !== undefined) assert.equal(out[4], "-----BEGIN CERTIFICATE-----");
  });

  it("keeps the host network by default; network: false leaves only the sandbox's own loopback", async () => {
    const server = createServer((socket) => socket.end());
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    try {
      const { port } = server.address() as AddressInfo;
      const connect = `node -e 'require("net").connect(${port}, "127.0.0.1").on("connect", () => { console.log("connected"); process.exit(0) }).on("error", (e) => { console.log(e.code); process.exit(0) })'`;
      assert.deepEqual(await lines(await isolated("bwrap-net").start(), connect), ["connected"]);
      const offline = await isolated("bwrap-offline", { network: false }).start();
      assert.deepEqual(await lines(offline, connect), ["ECONNREFUSED"]);
      assert.deepEqual(
        await lines(
          offline,
          "ls /sys/class/net 2>/dev/null || cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '",
        ),
        ["lo"],
      );
    } finally {
      server.close();
    }
  });

  it("clones a source and a skill given as paths of this machine here, and URLs inside the sandbox", async () => {
    const host = await mkdtemp(join(tmpdir(), "bwrap-git-"));
    const served = await serveFiles(host);
    try {
      const repo = makeRepo(await mkdtemp(join(host, "repo-")));
      // A bare copy git can fetch over HTTP from plain files (its "dumb" protocol).
      git(host, "clone", "--quiet", "--bare", repo, "app.git");
      git(join(host, "app.git"), "update-server-info");

      const local = await isolated(
        "bwrap-git-path",
        {},
        defineWorkspace({
          source: gitRepository(repo, { ref: "v1" }),
          skills: [gitSkill({ repo: `file://${repo}`, name: "review" })],
        }),
      ).start();
      const skill = local.workspace.gitSkills[0]?.path ?? "";
      assert.deepEqual(
        await lines(local, `cat README.md; cat ${skill}/README.md; test -e ${repo} || echo hidden`),
        ["one", "two", "hidden"],
      );
      assert.deepEqual(await lines(local, "git log --format=%s"), ["v1"]);
      assert.equal(served.requests(), 0, "paths are not fetched over the network");

      const remote = `${served.url}/app.git`;
      const online = await isolated(
        "bwrap-git-url",
        {},
        defineWorkspace({ source: gitRepository(remote) }),
      ).start();
      assert.deepEqual(await lines(online, "cat README.md; git remote get-url origin"), ["two", remote]);
      assert.ok(served.requests() > 0);
      // Cloned inside: without the network, the sandbox cannot reach this machine's loopback.
      await assert.rejects(
        isolated(
          "bwrap-git-offline",
          { network: false },
          defineWorkspace({ source: gitRepository(remote) }),
        ).start(),
        /git clone of http:\/\/127\.0\.0\.1:\d+\/app\.git failed: .*(connect|resolve)/is,
      );
    } finally {
      served.close();
      await rm(host, { recursive: true, force: true });
    }
  });

  it("mounts readOnly paths read-only and readWrite paths writable, at the same path", async () => {
    const ro = await mkdtemp(join(tmpdir(), "bwrap-ro-"));
    const rw = await mkdtemp(join(tmpdir(), "bwrap-rw-"));
    try {
      await writeFile(join(ro, "tool.txt"), "tool");
      const instance = await isolated("bwrap-binds", { readOnly: [ro], readWrite: [rw] }).start();
      const out = await lines(
        instance,
        `cat ${ro}/tool.txt; echo; touch ${ro}/x 2>/dev/null || echo "ro refused"; echo made > ${rw}/made.txt && echo "rw ok"`,
      );
      assert.deepEqual(out, ["tool", "ro refused", "rw ok"]);
      assert.equal(await readFile(join(rw, "made.txt"), "utf8"), "made\n");
    } finally {
      await rm(ro, { recursive: true, force: true });
      await rm(rw, { recursive: true, force: true });
    }
  });

  it("says what is wrong with the options", async () => {
    assert.throws(() => localProcessSandbox({ network: false }), /need isolate: "bwrap"/);
    assert.throws(
      () => localProcessSandbox({ isolate: "none", readOnly: ["/opt"] }),
      /need isolate: "bwrap"/,
    );
    await assert.rejects(
      isolated("bwrap-missing-bind", { readOnly: ["/does/not/exist"] }).start(),
      /readOnly path "\/does\/not\/exist" does not exist/,
    );
    await assert.rejects(
      isolated("bwrap-relative-bind", { readWrite: ["relative/dir"] }).start(),
      /readWrite path "relative\/dir" must be absolute/,
    );
  });

  it("says how to install bubblewrap when bwrap is not on PATH", async () => {
    const path = process.env["PATH"];
    process.env["PATH"] = "/nonexistent";
    try {
      await assert.rejects(
        isolated("bwrap-not-installed").start(),
        /bubblewrap \(bwrap\) is not installed or not on PATH: install bubblewrap \(Debian\/Ubuntu: `apt-get install bubblewrap`/,
      );
    } finally {
      process.env["PATH"] = path;
    }
  });

  it("names the sysctl when user namespaces are disabled", async () => {
    // A user namespace of the test's own where user.max_user_namespaces is 0 (the limit is per
    // namespace), so the machine's setting is untouched.
    const fixture = new URL("./fixtures/bwrap-start.js", import.meta.url).pathname;
    const child = spawn(
      "unshare",
      [
        "--user",
        "--map-root-user",
        "--mount",
        "--pid",
        "--fork",
        "--mount-proc",
        "sh",
        "-c",
        'echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$1"',
        process.execPath,
        fixture,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    const [line] = (await once(createInterface({ input: child.stdout }), "line")) as [string];
    const result = JSON.parse(line) as { error?: string };
    assert.match(result.error ?? "", /bubblewrap cannot create user namespaces here/);
    assert.match(result.error ?? "", /`sysctl -w user\.max_user_namespaces=15000` \(it is 0\)/);
  });
});

describe("isolate: bwrap, host process exit", { skip, timeout: 60_000 }, () => {
  const fixture = new URL("./fixtures/exit-without-dispose.js", import.meta.url).pathname;

  for (const mode of ["exit", "SIGTERM", "SIGKILL"] as const) {
    it(`${mode === "exit" ? "process.exit()" : mode} of the host kills every process of the sandbox`, async () => {
      const mark = marker();
      const child = spawn(process.execPath, [fixture, mode, "bwrap", mark], {
        stdio: ["pipe", "pipe", "inherit"],
      });
      const exited = once(child, "exit");
      const [line] = (await once(createInterface({ input: child.stdout }), "line")) as [string];
      const { pgid, workdir } = JSON.parse(line) as { pgid: number; workdir: string };
      await bothSleeping(mark);
      if (mode === "exit") child.stdin.end();
      else child.kill(mode);
      await exited;
      // After SIGKILL no exit hook runs: bwrap's --die-with-parent is what takes the sandbox down.
      await waitFor(async () => (await pidsRunning(`sleep ${mark}`)).length === 0, 10_000, "no sleep left");
      assert.deepEqual(await groupSurvivors(pgid), []);
      if (mode !== "SIGKILL") assert.equal(existsSync(workdir), false);
      else await rm(join(workdir, ".."), { recursive: true, force: true });
    });
  }
});
