import assert from "node:assert/strict";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { client, type SessionNotification } from "@agentclientprotocol/sdk";
import { startServer, tempDir, type RunningServer } from "@sandbox-agent/testkit";
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

  it("reports that shell commands are not available remotely", async () => {
    const instance = await definition.start();
    await assert.rejects(instance.spawn("true"), /cannot run shell commands/);
  });
});
