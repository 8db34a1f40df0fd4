import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import { pack } from "tar-stream";
import { tempDir, waitFor } from "@sandbox-agent/testkit";
import { defineSandbox, defineWorkspace, createSecrets } from "@sandbox-agent/ai-sandbox";
import { DockerSandboxError, dockerSandbox } from "../src/index.js";
import {
  docker,
  engineSkip,
  readText,
  RUN_ID,
  RUN_LABEL,
  runContainers,
  runIn,
  TEST_IMAGE,
  testProvider,
  waitNoContainers,
} from "./helpers.js";

const SECRET = `sk-secret-${RUN_ID}`;

describe(
  "dockerSandbox: lifecycle, commands and files in a real container",
  { skip: engineSkip, timeout: 180_000 },
  () => {
    after(() => waitNoContainers());

    it("creates a container whose server, files and commands are inside, with secrets only in process environments", async () => {
      const instance = await testProvider().create({ id: "basic", env: { API_SECRET: SECRET } });
      try {
        const health = await fetch(`${instance.server.baseUrl}/v2/health`, {
          headers: { authorization: `Bearer ${instance.server.token}` },
        });
        assert.equal(health.status, 200);
        assert.equal(
          (await fetch(`${instance.server.baseUrl}/v2/health`)).status,
          401,
          "the token is required",
        );

        const shell = await runIn(
          instance,
          'echo "$API_SECRET"; pwd; cat /proc/1/cmdline | tr "\\0" " "; exit 7',
        );
        assert.equal(shell.code, 7);
        const [secret, cwd, init] = shell.stdout.split("\n");
        assert.equal(secret, SECRET);
        assert.equal(cwd, "/workspace");
        assert.match(init ?? "", /init|catatonit/, "the container runs with an init process");

        const cat = await instance.spawn("cat; echo err >&2", { cwd: "/tmp", env: { EXTRA: "1" } });
        const writer = cat.stdin.getWriter();
        await writer.write(new TextEncoder().encode("through stdin\n"));
        await writer.close();
        assert.equal(await readText(cat.stdout), "through stdin\n");
        assert.deepEqual(await cat.exited, { code: 0, signal: null });
        assert.equal(cat.stderrTail(), "err\n");

        await instance.files.writeFile("notes/a.txt", "written through the server");
        assert.equal((await runIn(instance, "cat notes/a.txt")).stdout, "written through the server");
        assert.deepEqual(
          (await instance.files.list("notes")).map((e) => e.path),
          ["a.txt"],
        );

        const inspected = JSON.stringify(await docker.getContainer(instance.containerId).inspect());
        assert.ok(!inspected.includes(SECRET), "the secret is not in the container's config");
        assert.ok(!inspected.includes(instance.server.token), "neither is the server token");
      } finally {
        await instance.dispose();
      }
      assert.equal((await runContainers()).filter((c) => c.Id === instance.containerId).length, 0);
    });

    it("publishes the server's port on 127.0.0.1 only when the container has its own network", async () => {
      // Podman's slirp4netns: a network namespace of the container's own, no bridge on this machine.
      const instance = await testProvider({ network: "slirp4netns" }).create({ id: "published", env: {} });
      try {
        const { NetworkSettings } = await docker.getContainer(instance.containerId).inspect();
        const bindings = Object.values(NetworkSettings.Ports ?? {}).flat();
        assert.deepEqual(
          bindings.map((b) => b?.HostIp),
          ["127.0.0.1"],
        );
        assert.equal(new URL(instance.server.baseUrl).hostname, "127.0.0.1");
        assert.equal((await runIn(instance, "echo inside")).stdout, "inside\n");
      } finally {
        await instance.dispose();
      }
    });

    it("kill stops the command's whole process group inside the container", async () => {
      const instance = await testProvider().create({ id: "kill", env: {} });
      try {
        const proc = await instance.spawn("sleep 301 & sleep 302; wait");
        await proc.stdin.close();
        await waitFor(
          async () => (await runIn(instance, "ps -eo args")).stdout.includes("sleep 302"),
          10_000,
        );
        await proc.kill();
        assert.equal((await proc.exited).signal, "SIGTERM");
        const left = (await runIn(instance, "ps -eo args")).stdout;
        assert.doesNotMatch(left, /sleep 30[12]/);
      } finally {
        await instance.dispose();
      }
    });

    it("clones git sources inside the sandbox, runs setup there, and places file and git skills", async () => {
      const host = tempDir("docker-git-");
      const repo = path.join(host, "app.git");
      const work = path.join(host, "work");
      mkdirSync(work);
      const git = (cwd: string, ...args: string[]) =>
        runHost("git", ["-c", "init.defaultBranch=main", ...args], cwd);
      await git(work, "init", "--quiet");
      writeFileSync(path.join(work, "README.md"), "v1\n");
      await git(work, "add", ".");
      await git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "v1");
      await git(work, "tag", "v1");
      writeFileSync(path.join(work, "README.md"), "v2\n");
      await git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-am", "v2");
      await git(host, "clone", "--quiet", "--bare", work, repo);
      const sandbox = defineSandbox({
        id: "git",
        provider: testProvider({ mounts: [{ source: repo, target: "/mnt/app.git", readOnly: true }] }),
        workspace: defineWorkspace({
          source: { kind: "git", url: "file:///mnt/app.git", ref: "v1" },
          setup: ['test "$(cat README.md)" = v1 && hostname > setup-ran.txt'],
          secrets: createSecrets({ SETUP_SECRET: SECRET }),
          skills: [
            { kind: "file", path: ".skills/hello.md", content: "hi" },
            { kind: "git", name: "review", repo: "file:///mnt/app.git" },
          ],
          instructions: "Be brief.",
          instructionLinks: ["CLAUDE.md"],
        }),
      });
      try {
        const instance = await sandbox.start();
        assert.equal(
          (await runIn(instance, "git remote get-url origin")).stdout.trim(),
          "file:///mnt/app.git",
        );
        assert.equal((await runIn(instance, "cat README.md")).stdout, "v1\n");
        assert.ok((await runIn(instance, "cat setup-ran.txt")).stdout.trim().length > 0);
        assert.equal((await runIn(instance, "cat .skills/hello.md")).stdout, "hi");
        assert.equal(
          (await runIn(instance, `cat ${instance.workspace.gitSkills[0]?.path}/README.md`)).stdout,
          "v2\n",
        );
        assert.equal((await runIn(instance, "readlink CLAUDE.md")).stdout.trim(), "/workspace/AGENTS.md");
        assert.equal((await runIn(instance, 'echo "$SETUP_SECRET"')).stdout.trim(), SECRET);
      } finally {
        await sandbox.dispose();
        rmSync(host, { recursive: true, force: true });
      }
    });

    it("resumes a keyed sandbox from another Node process: started again, workspace intact, setup not repeated", async () => {
      const key = `resume-${RUN_ID}`;
      const script = `
      import { defineSandbox, defineWorkspace } from ${JSON.stringify(import.meta.resolve("@sandbox-agent/ai-sandbox"))};
      import { dockerSandbox } from ${JSON.stringify(new URL("../src/index.js", import.meta.url).href)};
      const sandbox = defineSandbox({
        id: "resumable",
        provider: dockerSandbox(JSON.parse(process.argv[1])),
        workspace: defineWorkspace({ setup: "echo ran >> setup.log" }),
      });
      const instance = await sandbox.start();
      await instance.files.writeFile("kept.txt", process.argv[2]);
      process.stdout.write("ready\\n");
      process.exit(0); // no dispose: the exit hook stops the keyed container
    `;
      const options = {
        image: TEST_IMAGE,
        network: process.env.SANDBOX_AGENT_TEST_NETWORK ?? "host",
        pull: "never",
        key,
        labels: { [RUN_LABEL]: RUN_ID },
      };
      const out = await runHost(process.execPath, [
        "--input-type=module",
        "-e",
        script,
        JSON.stringify(options),
        "from process one",
      ]);
      assert.equal(out.trim(), "ready");
      const [created] = await runContainers(`dev.sandboxagent.key=${key}`);
      assert.ok(created, "the keyed container is kept");
      await waitFor(
        async () => !(await docker.getContainer(created.Id).inspect()).State.Running,
        20_000,
        "stopped at exit",
      );

      const provider = testProvider({ key });
      const sandbox = defineSandbox({
        id: "resumable",
        provider,
        workspace: defineWorkspace({ setup: "echo ran >> setup.log" }),
      });
      try {
        const instance = await sandbox.start();
        assert.equal((await runIn(instance, "cat kept.txt")).stdout, "from process one");
        assert.equal((await runIn(instance, "cat setup.log")).stdout, "ran\n", "setup ran once");
        const again = await provider.resume(key);
        assert.equal(again.containerId, created.Id, "reattached to the running container");
        assert.equal(
          Buffer.from((await again.files.readFile("kept.txt")) ?? []).toString(),
          "from process one",
        );
      } finally {
        await sandbox.dispose();
      }
      assert.equal(
        (await docker.getContainer(created.Id).inspect()).State.Running,
        false,
        "dispose stops a keyed sandbox",
      );
      assert.equal(await provider.destroy(key), true);
      assert.equal(await provider.destroy(key), false);
      await assert.rejects(provider.resume(key), (error: DockerSandboxError) => error.code === "not-found");
    });

    it("snapshots a sandbox to an image and restores from it without bootstrapping again", async () => {
      const tag = `localhost/sandbox-agent-snapshot-test:${RUN_ID}`;
      const first = defineSandbox({
        id: "snap",
        provider: testProvider(),
        workspace: defineWorkspace({ setup: "echo once >> setup.log" }),
      });
      const provider = testProvider();
      try {
        const created = await provider.create({ id: "snap-src", env: {} });
        await created.files.writeFile("state.txt", "before snapshot");
        assert.equal(await created.snapshot({ tag }), tag);
        await created.dispose();
        const restored = defineSandbox({
          id: "snap",
          provider: testProvider({ image: tag }),
          workspace: defineWorkspace({ setup: "echo again >> setup.log" }),
        });
        const instance = await restored.start();
        assert.equal((await runIn(instance, "cat state.txt")).stdout, "before snapshot");
        assert.equal((await runIn(instance, "cat setup.log 2>/dev/null || echo none")).stdout, "none\n");
        await restored.dispose();
      } finally {
        await first.dispose();
        await docker
          .getImage(tag)
          .remove({ force: true })
          .catch(() => undefined);
      }
    });

    it("removes an ephemeral container when the host process ends by SIGTERM", async () => {
      const label = `${RUN_LABEL}=${RUN_ID}-exit`;
      const script = `
      import { dockerSandbox } from ${JSON.stringify(new URL("../src/index.js", import.meta.url).href)};
      import { defineSandbox } from ${JSON.stringify(import.meta.resolve("@sandbox-agent/ai-sandbox"))};
      const sandbox = defineSandbox({ id: "exiting", provider: dockerSandbox(JSON.parse(process.argv[1])) });
      await sandbox.start();
      process.stdout.write("ready\\n");
      setInterval(() => {}, 1000);
    `;
      const options = {
        image: TEST_IMAGE,
        network: process.env.SANDBOX_AGENT_TEST_NETWORK ?? "host",
        pull: "never",
        labels: { [RUN_LABEL]: `${RUN_ID}-exit` },
      };
      const child = spawn(process.execPath, ["--input-type=module", "-e", script, JSON.stringify(options)], {
        stdio: ["ignore", "pipe", "inherit"],
      });
      await new Promise<void>((resolve, reject) => {
        child.stdout.on("data", (d: Buffer) => d.toString().includes("ready") && resolve());
        child.once("exit", (code) => reject(new Error(`child exited early with ${code}`)));
      });
      assert.equal((await runContainers(label)).length, 1);
      child.kill("SIGTERM");
      await waitNoContainers(label, 20_000);
    });

    it("runs 10 sandboxes at once and leaves none behind", async () => {
      const provider = testProvider();
      const started = Date.now();
      const instances = await Promise.all(
        Array.from({ length: 10 }, (_, i) => provider.create({ id: `many-${i}`, env: { N: String(i) } })),
      );
      const createMs = Date.now() - started;
      try {
        const answers = await Promise.all(instances.map((instance) => runIn(instance, 'echo "$N"')));
        assert.deepEqual(
          answers.map((a) => a.stdout.trim()),
          Array.from({ length: 10 }, (_, i) => String(i)),
        );
        assert.equal(new Set(instances.map((i) => i.server.baseUrl)).size, 10);
      } finally {
        await Promise.all(instances.map((instance) => instance.dispose()));
      }
      assert.equal(
        (await runContainers()).filter((c) => c.Labels["dev.sandboxagent.sandbox"]?.startsWith("many-"))
          .length,
        0,
      );
      assert.ok(createMs < 60_000, `10 concurrent creates took ${createMs} ms`);
    });
  },
);

describe("dockerSandbox: errors say what to do", { skip: engineSkip, timeout: 120_000 }, () => {
  after(() => waitNoContainers());

  it("no engine at the socket", async () => {
    const provider = dockerSandbox({
      image: TEST_IMAGE,
      socket: path.join(tempDir("no-engine-"), "docker.sock"),
    });
    await assert.rejects(provider.create({ id: "x", env: {} }), (error: DockerSandboxError) => {
      assert.equal(error.code, "engine-unreachable");
      assert.match(
        error.message,
        /no container engine answers at the socket option .*start dockerd, or Podman/,
      );
      return true;
    });
  });

  it("a missing image, with how to build or pull it", async () => {
    const provider = testProvider({ image: "localhost/sandbox-agent-no-such-image:1" });
    await assert.rejects(provider.create({ id: "x", env: {} }), (error: DockerSandboxError) => {
      assert.equal(error.code, "image-missing");
      assert.match(error.message, /is not present: build it .*npm run image.* or pull it/);
      return true;
    });
  });

  it("an image without node", async () => {
    const tag = `localhost/sandbox-agent-no-node-${RUN_ID}:latest`;
    const tar = pack();
    tar.entry({ name: "etc/hostname" }, "empty\n");
    tar.finalize();
    await new Promise<void>((resolve, reject) =>
      docker.importImage(tar as unknown as NodeJS.ReadableStream, { repo: tag }, (error, stream) => {
        if (error) return reject(error);
        docker.modem.followProgress(stream as NodeJS.ReadableStream, (e: Error | null) =>
          e ? reject(e) : resolve(),
        );
      }),
    );
    try {
      await assert.rejects(
        testProvider({ image: tag }).create({ id: "x", env: {} }),
        (error: DockerSandboxError) => {
          assert.equal(error.code, "no-node", error.message);
          assert.match(error.message, /no usable Node.js/);
          return true;
        },
      );
    } finally {
      await docker
        .getImage(tag)
        .remove({ force: true })
        .catch(() => undefined);
    }
  });

  it("a server that fails to start, with its log tail", async () => {
    const bundle = tempDir("broken-bundle-");
    writeFileSync(
      path.join(bundle, "sandbox-agent.mjs"),
      'console.error("boom: the server cannot start"); process.exit(1);\n',
    );
    try {
      await assert.rejects(
        testProvider({ serverBundle: bundle }).create({ id: "x", env: {} }),
        (error: DockerSandboxError) => {
          assert.equal(error.code, "server-failed", error.message);
          assert.match(error.message, /exited with code 1.*\n.*boom: the server cannot start/s);
          return true;
        },
      );
    } finally {
      rmSync(bundle, { recursive: true, force: true });
    }
  });
});

function runHost(file: string, args: string[], cwd?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.once("exit", (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${file} ${args.join(" ")}: ${code}\n${err}`)),
    );
  });
}
