import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  createSecrets,
  defineSandbox,
  defineWorkspace,
  gitRepository,
  sandboxAgentSandbox,
  withSandbox,
  type SandboxDefinition,
} from "@sandbox-agent/ai-sandbox";
import { startServer, tempDir, type RunningServer } from "@sandbox-agent/testkit";
import { chat, type StreamChunk } from "@tanstack/ai";
import { acpCompatible, startAcpServerInSandbox, type AcpServerHandle } from "../src/index.js";
import { customs, freePort, mockCommand, ofType, ownWebSocketServerCommand, texts, user } from "./helpers.js";

const TOKEN = "ai-acp-test-token";

async function collect(stream: AsyncIterable<StreamChunk>): Promise<StreamChunk[]> {
  const chunks: StreamChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

/** A repository with one commit, to stand in for `githubRepo({ repo: 'owner/app' })` without a network. */
function localRepository(): string {
  const repo = tempDir("ai-acp-remote-repo-");
  writeFileSync(join(repo, "README.md"), "# app\n");
  const git = (...args: string[]) =>
    execFileSync(
      "git",
      ["-c", "init.defaultBranch=main", "-c", "user.name=t", "-c", "user.email=t@t", ...args],
      {
        cwd: repo,
      },
    );
  git("init", "--quiet");
  git("add", ".");
  git("commit", "--quiet", "-m", "app v1");
  return repo;
}

describe("chat() through the sandbox-agent provider (real server, real HTTP)", { timeout: 300_000 }, () => {
  let server: RunningServer;
  let workdir: string;
  let sandbox: SandboxDefinition;
  const mock = acpCompatible({ name: "mock" });
  before(async () => {
    workdir = tempDir("ai-acp-remote-workdir-");
    server = await startServer({ token: TOKEN, args: ["--workdir", workdir] });
    sandbox = defineSandbox({
      id: "ai-acp-remote",
      provider: sandboxAgentSandbox({ baseUrl: server.baseUrl, token: TOKEN, agent: "mock", workdir }),
    });
  });
  after(async () => {
    await mock.dispose();
    await sandbox?.dispose();
    await server?.stop();
    rmSync(workdir, { recursive: true, force: true });
  });

  it("streams a turn from the server's mock agent over /v2/rpc", async () => {
    const chunks = await collect(
      chat({
        adapter: mock("m"),
        messages: [user("echo remote hello; tool read x")],
        middleware: [withSandbox(sandbox)],
      }),
    );
    assert.equal(texts(chunks), "remote hello", JSON.stringify(chunks.filter((c) => c.type === "RUN_ERROR")));
    assert.equal(customs(chunks, "mock.session-id").length, 1);
    assert.equal(chunks.at(-1)?.type, "RUN_FINISHED");
  });

  it("runs the harness docs' basic example: command, git source, setup and secrets inside the remote sandbox", async () => {
    const repo = localRepository();
    // The basic example of the harness documentation, with the mock agent for `pi` and a local
    // repository for the GitHub one; the command runs in the sandbox through the process API.
    const pi = acpCompatible({
      name: "pi",
      command: ({ model, harnessCwd }) => `MOCK_MODEL=${model} ${mockCommand()} # --cwd ${harnessCwd}`,
      authMethodId: "mock-api-key",
      refusalMessage: "Pi refused the request.",
    });
    const example = defineSandbox({
      id: "pi-agent",
      provider: sandboxAgentSandbox({ baseUrl: server.baseUrl, token: TOKEN, workdir }),
      workspace: defineWorkspace({
        source: gitRepository(repo),
        setup: ["echo installed > .setup-done"],
        secrets: createSecrets({ MOCK_API_KEY: "secret-from-workspace" }),
      }),
    });
    try {
      const chunks = await collect(
        chat({
          adapter: pi("pi-fast"),
          messages: [user("echo hello from the sandbox; env MOCK_MODEL; env MOCK_API_KEY")],
          middleware: [withSandbox(example)],
        }),
      );
      assert.equal(
        texts(chunks),
        "hello from the sandboxMOCK_MODEL=pi-fastMOCK_API_KEY=secret-from-workspace",
        JSON.stringify(ofType(chunks, "RUN_ERROR")),
      );
      assert.equal(readFileSync(join(workdir, "README.md"), "utf8"), "# app\n", "source cloned");
      assert.equal(readFileSync(join(workdir, ".setup-done"), "utf8"), "installed\n", "setup ran");
      const listed = await fetch(`${server.baseUrl}/v2/processes`, { headers: server.headers() });
      const { processes } = (await listed.json()) as { processes: Array<{ args: string[]; status: string }> };
      assert.ok(
        processes.some((p) => p.status === "running" && p.args.join(" ").includes("mock-agent")),
        "the warm agent is a process of the server",
      );
      const refused = await collect(
        chat({
          adapter: pi("pi-fast"),
          messages: [user("stop refusal")],
          middleware: [withSandbox(example)],
        }),
      );
      assert.equal(ofType(refused, "RUN_ERROR")[0]?.message, "Pi refused the request.");
    } finally {
      await pi.dispose();
      await example.dispose();
      rmSync(repo, { recursive: true, force: true });
    }
  });

  it("emitDiff reports the agent's file changes through the remote file API", async () => {
    const differ = acpCompatible({ name: "mock", command: () => mockCommand(), emitDiff: true });
    try {
      const chunks = await collect(
        chat({
          adapter: differ("m"),
          messages: [user("write diffs/new.txt fresh")],
          middleware: [withSandbox(sandbox)],
        }),
      );
      const changes = customs(chunks, "file.changed") as Array<{ type: string; path: string; diff: string }>;
      assert.deepEqual(
        changes.map((c) => [c.type, c.path]),
        [["create", join(workdir, "diffs/new.txt")]],
      );
      assert.match(changes[0]!.diff, /^\+fresh$/m);
    } finally {
      await differ.dispose();
    }
  });

  it("startAcpServerInSandbox starts the agent's own WebSocket ACP server through the remote process API", async () => {
    const port = await freePort();
    const servers: AcpServerHandle[] = [];
    const overWs = acpCompatible({
      name: "mock",
      openTransport: async ({ sandbox: instance, harnessCwd, signal }) => {
        const acpServer = await startAcpServerInSandbox(instance, {
          port,
          cwd: harnessCwd,
          command: ownWebSocketServerCommand(port),
          readyMarker: "LISTENING",
          signal,
        });
        servers.push(acpServer);
        const ws = await acpServer.connect(signal);
        return {
          kind: "stream",
          stream: ws.stream,
          dispose: async () => {
            ws.close();
            await acpServer.dispose();
          },
        };
      },
    });
    try {
      const chunks = await collect(
        chat({
          adapter: overWs("m"),
          messages: [user("echo over a remote websocket")],
          middleware: [withSandbox(sandbox)],
        }),
      );
      assert.equal(texts(chunks), "over a remote websocket", JSON.stringify(ofType(chunks, "RUN_ERROR")));
      assert.equal(servers.length, 1);
    } finally {
      await overWs.dispose();
    }
  });

  it("workspace secrets reach a server agent over /v2/rpc when its owner lets clients pass them (clientEnv)", async () => {
    const secrets = createSecrets({ PI_API_KEY: "secret-from-workspace" });
    const owner = await startServer({
      token: TOKEN,
      // The sandbox's owner: clients may set PI_API_KEY for the built-in mock agent.
      config: { agents: { mock: { clientEnv: ["PI_API_KEY"] } } },
      timeoutMs: 30_000,
    });
    const strict = await startServer({ token: TOKEN, timeoutMs: 30_000 });
    const agent = acpCompatible({ name: "mock" });
    const remote = (id: string, at: RunningServer) =>
      defineSandbox({
        id,
        // No workdir: the provider learns it (and the file API's root) from the server's /v2/health.
        provider: sandboxAgentSandbox({ baseUrl: at.baseUrl, token: TOKEN, agent: "mock" }),
        workspace: defineWorkspace({ secrets }),
      });
    const allowed = remote("client-env-allowed", owner);
    const refused = remote("client-env-refused", strict);
    try {
      const chunks = await collect(
        chat({
          adapter: agent("m"),
          messages: [user("env PI_API_KEY")],
          middleware: [withSandbox(allowed)],
        }),
      );
      assert.equal(
        texts(chunks),
        "PI_API_KEY=secret-from-workspace",
        JSON.stringify(ofType(chunks, "RUN_ERROR")),
      );
      const health = (await (
        await fetch(`${owner.baseUrl}/v2/health`, { headers: owner.headers() })
      ).json()) as {
        workdir: string;
      };
      assert.equal((await allowed.start()).workdir, health.workdir);
      const failed = await collect(
        chat({
          adapter: agent("m"),
          messages: [user("env PI_API_KEY")],
          middleware: [withSandbox(refused)],
        }),
      );
      const error = ofType(failed, "RUN_ERROR")[0];
      assert.match(JSON.stringify(error), /PI_API_KEY.*clientEnv/s, JSON.stringify(failed));
    } finally {
      await agent.dispose();
      await allowed.dispose();
      await refused.dispose();
      await owner.stop();
      await strict.stop();
    }
  });
});
