import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { client, type SessionNotification } from "@agentclientprotocol/sdk";
import { processesWith, startServer, tempDir, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import {
  defineSandbox,
  defineWorkspace,
  diffSnapshots,
  localDirectory,
  sandboxAgentSandbox,
  snapshotFiles,
  type SandboxAcpStream,
  type SandboxDefinition,
  type SandboxInstance,
} from "../src/index.js";
import { readText, runIn } from "./helpers.js";

const TOKEN = "test-token-ai-sandbox";
let server: RunningServer;
let workdir: string;
let source: string;
let definition: SandboxDefinition;

before(async () => {
  workdir = tempDir("ai-sandbox-remote-");
  source = tempDir("ai-sandbox-remote-src-");
  writeFileSync(join(source, "README.md"), "remote\n");
  server = await startServer({ token: TOKEN, args: ["--workdir", workdir] });
  definition = defineSandbox({
    id: "remote",
    provider: sandboxAgentSandbox({ baseUrl: server.baseUrl, token: TOKEN, agent: "mock", workdir }),
    workspace: defineWorkspace({ source: localDirectory(source), instructions: "Be brief." }),
  });
});
after(async () => {
  await definition?.dispose();
  await server?.stop();
  for (const dir of [workdir, source, server?.dataDir])
    if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Connects an ACP client over `openAcp`, runs one prompt, returns the agent's text chunks. */
async function promptOnce(
  instance: SandboxInstance,
  text: string,
): Promise<{ texts: string[]; stream: SandboxAcpStream }> {
  assert.ok(instance.openAcp, "sandbox-agent provides openAcp");
  const stream = await instance.openAcp({ agent: "ignored-by-provider-option" });
  const updates: SessionNotification[] = [];
  const connection = client({ name: "ai-sandbox-remote-test" })
    .onNotification("session/update", ({ params }) => void updates.push(params))
    .onRequest("session/request_permission", () => ({
      outcome: { outcome: "selected", optionId: "allow_once" },
    }))
    .connect(stream);
  await connection.agent.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  const { sessionId } = await connection.agent.request("session/new", {
    cwd: instance.workdir,
    mcpServers: [],
  });
  const result = await connection.agent.request("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text }],
  });
  assert.equal(result.stopReason, "end_turn");
  const texts = updates.flatMap((n) =>
    n.update.sessionUpdate === "agent_message_chunk" && n.update.content.type === "text"
      ? [n.update.content.text]
      : [],
  );
  return { texts, stream };
}

describe("sandbox-agent provider (real server)", { timeout: 30_000 }, () => {
  it("opens the server's ACP transport for the configured agent", async () => {
    const bare = defineSandbox({
      id: "remote-bare",
      provider: sandboxAgentSandbox({ baseUrl: server.baseUrl, token: TOKEN, agent: "mock", workdir }),
    });
    try {
      const { texts, stream } = await promptOnce(await bare.start(), "echo over http");
      assert.deepEqual(texts, ["over http"]);
      await stream.close();
    } finally {
      await bare.dispose();
    }
  });

  it("bootstraps the workspace through the server filesystem API", async () => {
    const instance = await definition.start();
    assert.equal(instance.provider, "sandbox-agent");
    assert.equal(Buffer.from((await instance.files.readFile("README.md")) ?? []).toString(), "remote\n");
    assert.equal(Buffer.from((await instance.files.readFile("AGENTS.md")) ?? []).toString(), "Be brief.\n");
    await instance.files.writeFile("dir/sub/x.txt", "x");
    assert.deepEqual(
      (await instance.files.list("dir")).map((e) => `${e.type}:${e.path}`),
      ["directory:sub", "file:sub/x.txt"],
    );
    await instance.files.remove("dir/sub/x.txt");
    assert.equal(await instance.files.readFile("dir/sub/x.txt"), undefined);
  });

  it("reaches the agent over openAcp and diffs what it wrote, new file included", async () => {
    const instance = await definition.start();
    const before = await snapshotFiles(instance);
    const { texts, stream } = await promptOnce(instance, "echo hello; write out/new.txt fresh");
    assert.deepEqual(texts, ["hello", "wrote out/new.txt"]);
    const diffs = diffSnapshots(before, await snapshotFiles(instance));
    assert.deepEqual(
      diffs.map((d) => [d.type, d.path]),
      [["create", "out/new.txt"]],
    );
    assert.match(diffs[0]?.diff ?? "", /^\+fresh$/m);
    await stream.close();
  });

  it("maps sandbox paths onto an --fs-root above the workdir", async () => {
    const root = tempDir("ai-sandbox-fsroot-");
    const agentDir = join(root, "project");
    mkdirSync(agentDir);
    const rooted = await startServer({ token: TOKEN, args: ["--workdir", agentDir, "--fs-root", root] });
    const mapped = defineSandbox({
      id: "remote-fsroot",
      provider: sandboxAgentSandbox({
        baseUrl: rooted.baseUrl,
        token: TOKEN,
        workdir: agentDir,
        fsRoot: root,
      }),
    });
    try {
      const instance = await mapped.start();
      await instance.files.writeFile("in-workdir.txt", "a");
      await instance.files.writeFile(`${root}/beside.txt`, "b");
      assert.equal(readFileSync(join(agentDir, "in-workdir.txt"), "utf8"), "a");
      assert.equal(readFileSync(join(root, "beside.txt"), "utf8"), "b");
      await assert.rejects(instance.files.readFile("../../etc/passwd"), /outside the server fs root/);
    } finally {
      await mapped.dispose();
      await rooted.stop();
      for (const dir of [root, rooted.dataDir]) rmSync(dir, { recursive: true, force: true });
    }
  });

  it("spawns through the process API: stdin, stdout, stderr tail, exit status, env and cwd", async () => {
    const instance = await definition.start();
    const cat = await instance.spawn("cat; echo to-stderr >&2; exit 4");
    const writer = cat.stdin.getWriter();
    await writer.write(new TextEncoder().encode("through "));
    await writer.write(new TextEncoder().encode("the server\n"));
    await writer.close();
    assert.equal(await readText(cat.stdout), "through the server\n");
    assert.deepEqual(await cat.exited, { code: 4, signal: null });
    assert.equal(cat.stderrTail(), "to-stderr\n");

    await instance.files.writeFile("sub/marker.txt", "m");
    const env = await runIn(instance, "pwd; echo $FROM_SPAWN; ls", { FROM_SPAWN: "spawn-env" });
    assert.equal(env.stdout.split("\n")[1], "spawn-env");
    const inSub = await instance.spawn("pwd; ls", { cwd: "sub" });
    await inSub.stdin.close();
    assert.equal(await readText(inSub.stdout), `${join(workdir, "sub")}\nmarker.txt\n`);
  });

  it("runs workspace setup commands in the remote sandbox and fails start() with their stderr", async () => {
    const setUp = defineSandbox({
      id: "remote-setup",
      provider: sandboxAgentSandbox({ baseUrl: server.baseUrl, token: TOKEN, workdir }),
      workspace: defineWorkspace({
        env: { SETUP_VALUE: "from-workspace" },
        setup: ["echo $SETUP_VALUE > setup-ran.txt", "git --version > git-version.txt"],
      }),
    });
    try {
      await setUp.start();
      assert.equal(readFileSync(join(workdir, "setup-ran.txt"), "utf8"), "from-workspace\n");
      assert.match(readFileSync(join(workdir, "git-version.txt"), "utf8"), /^git version/);
    } finally {
      await setUp.dispose();
    }
    const failing = defineSandbox({
      id: "remote-setup-fails",
      provider: sandboxAgentSandbox({ baseUrl: server.baseUrl, token: TOKEN, workdir }),
      workspace: defineWorkspace({ setup: "echo missing-tool >&2; exit 9" }),
    });
    await assert.rejects(failing.start(), /failed \(exit code 9\): missing-tool/);
    await failing.dispose();
  });

  it("clones a git repository inside the sandbox with git run through spawn", async () => {
    const repo = tempDir("ai-sandbox-remote-repo-");
    const git = (...args: string[]) =>
      execFileSync(
        "git",
        ["-c", "init.defaultBranch=main", "-c", "user.name=t", "-c", "user.email=t@t", ...args],
        {
          cwd: repo,
        },
      );
    writeFileSync(join(repo, "SKILL.md"), "# skill\n");
    git("init", "--quiet");
    git("add", ".");
    git("commit", "--quiet", "-m", "skill v1");
    const instance = await definition.start();
    const clone = await runIn(
      instance,
      `git clone --quiet ${repo} skills/cloned && git -C skills/cloned log --format=%s`,
    );
    assert.deepEqual(clone, { stdout: "skill v1\n", code: 0 });
    assert.equal(
      Buffer.from((await instance.files.readFile("skills/cloned/SKILL.md")) ?? []).toString(),
      "# skill\n",
    );
    rmSync(repo, { recursive: true, force: true });
  });

  it("kills a spawned process group, and dispose() kills what still runs", async () => {
    const marker = "4711.81";
    const temporary = defineSandbox({
      id: "remote-kill",
      provider: sandboxAgentSandbox({ baseUrl: server.baseUrl, token: TOKEN, workdir }),
    });
    const instance = await temporary.start();
    const killed = await instance.spawn(`sleep ${marker} & sleep ${marker}`);
    await waitFor(() => processesWith(marker).length >= 2, 5000, "the sleeps");
    await killed.kill();
    assert.equal((await killed.exited).signal, "SIGTERM");
    assert.deepEqual(processesWith(marker), []);
    await instance.spawn(`sleep ${marker}`);
    await waitFor(() => processesWith(marker).length >= 1, 5000, "the sleep");
    await temporary.dispose();
    assert.deepEqual(processesWith(marker), []);
    await assert.rejects(instance.spawn("true"), /disposed/);
  });
});
