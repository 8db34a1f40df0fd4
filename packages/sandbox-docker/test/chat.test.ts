import assert from "node:assert/strict";
import { existsSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { freePort, repoRoot, tempDir } from "@sandbox-agent/testkit";
import {
  createSecrets,
  defineSandbox,
  defineWorkspace,
  localDirectory,
  withSandbox,
  type SandboxDefinition,
} from "@sandbox-agent/ai-sandbox";
import { acpCompatible, startAcpServerInSandbox } from "@sandbox-agent/ai-acp";
import { chat, type StreamChunk } from "@tanstack/ai";
import {
  containerOf,
  engineSkip,
  RUN_ID,
  runIn,
  TEST_NETWORK,
  testProvider,
  waitNoContainers,
} from "./helpers.js";

const SECRET = `pi-key-${RUN_ID}`;
/** The mock agent as a command inside the container: the bundle ships it beside the server. */
const MOCK_IN_CONTAINER = "node /opt/sandbox-agent/server/mock-agent.mjs";

const user = (content: string) => ({ role: "user" as const, content });
const texts = (chunks: StreamChunk[]) =>
  chunks.flatMap((c) => (c.type === "TEXT_MESSAGE_CONTENT" ? [c.delta] : [])).join("");
const customs = (chunks: StreamChunk[], name: string) =>
  chunks.flatMap((c) => (c.type === "CUSTOM" && c.name === name ? [c.value] : []));
const terminal = (chunks: StreamChunk[]) =>
  chunks.filter((c) => c.type === "RUN_FINISHED" || c.type === "RUN_ERROR").at(-1) as
    (StreamChunk & { code?: string; message?: string }) | undefined;

async function collect(
  stream: AsyncIterable<StreamChunk>,
  onChunk?: (c: StreamChunk) => void,
): Promise<StreamChunk[]> {
  const chunks: StreamChunk[] = [];
  for await (const chunk of stream) {
    chunks.push(chunk);
    onChunk?.(chunk);
  }
  return chunks;
}

describe(
  "chat() in a docker sandbox: the harness docs' basic usage",
  { skip: engineSkip, timeout: 180_000 },
  () => {
    let source: string;
    let sandbox: SandboxDefinition;
    // Configured once, as in the docs: the agent CLI is a shell command run inside the sandbox.
    const mock = acpCompatible({ name: "mock", command: () => MOCK_IN_CONTAINER, emitDiff: true });

    before(() => {
      source = tempDir("docker-chat-src-");
      writeFileSync(path.join(source, "README.md"), "the app\n");
      sandbox = defineSandbox({
        id: "chat-agent",
        provider: testProvider(),
        workspace: defineWorkspace({
          source: localDirectory(source),
          setup: ["cat /proc/1/cmdline | tr '\\0' ' ' > setup-ran.txt"],
          secrets: createSecrets({ PI_API_KEY: SECRET }),
        }),
      });
    });
    after(async () => {
      await mock.dispose();
      await sandbox?.dispose();
      if (source) rmSync(source, { recursive: true, force: true });
      await waitNoContainers();
    });

    it("runs the agent in the container: setup ran there, its file is there and not on the host, the secret reaches only the agent", async () => {
      const chunks = await collect(
        chat({
          adapter: mock("mock-fast"),
          messages: [user("env PI_API_KEY; write made-by-agent.txt hello from the agent")],
          middleware: [withSandbox(sandbox)],
        }),
      );
      assert.equal(terminal(chunks)?.type, "RUN_FINISHED", JSON.stringify(terminal(chunks)));
      assert.equal(texts(chunks), `PI_API_KEY=${SECRET}wrote made-by-agent.txt`);

      const instance = await sandbox.start();
      assert.equal((await runIn(instance, "cat made-by-agent.txt")).stdout, "hello from the agent");
      assert.equal(existsSync(path.join(source, "made-by-agent.txt")), false, "nothing written on the host");
      assert.match(
        (await runIn(instance, "cat setup-ran.txt")).stdout,
        /sandbox-agent\/start\.mjs/,
        "setup ran beside the server",
      );
      assert.equal(existsSync(path.join(source, "setup-ran.txt")), false);

      const changes = customs(chunks, "file.changed") as Array<{ type: string; path: string; diff: string }>;
      assert.deepEqual(
        changes.map((c) => [c.type, c.path]),
        [["create", "/workspace/made-by-agent.txt"]],
      );
      assert.match(changes[0]?.diff ?? "", /^\+hello from the agent$/m);

      const inspected = JSON.stringify(await (await containerOf("chat-agent")).inspect());
      assert.ok(!inspected.includes(SECRET), "the secret is not in docker inspect");
    });

    it("abort cancels the turn, and the next turn runs", async () => {
      const controller = new AbortController();
      await collect(
        chat({
          adapter: mock("mock-fast"),
          messages: [user("echo started; hang")],
          middleware: [withSandbox(sandbox)],
          abortController: controller,
        }),
        (chunk) => chunk.type === "TEXT_MESSAGE_CONTENT" && controller.abort(),
      );
      const next = await collect(
        chat({
          adapter: mock("mock-fast"),
          messages: [user("echo after abort")],
          middleware: [withSandbox(sandbox)],
        }),
      );
      assert.equal(texts(next), "after abort");
    });

    it("uses the in-container server's agent over HTTP when the harness has no command", async () => {
      const viaServer = acpCompatible({ name: "mock" });
      const served = defineSandbox({
        id: "chat-openacp",
        provider: testProvider(),
        workspace: defineWorkspace({ secrets: createSecrets({ MOCK_API_KEY: SECRET }) }),
      });
      try {
        const chunks = await collect(
          chat({
            adapter: viaServer("mock-fast"),
            messages: [user("env MOCK_API_KEY")],
            middleware: [withSandbox(served)],
          }),
        );
        assert.equal(texts(chunks), `MOCK_API_KEY=${SECRET}`, JSON.stringify(terminal(chunks)));
      } finally {
        await viaServer.dispose();
        await served.dispose();
      }
    });

    it("a container killed mid-turn ends the run with a clear RUN_ERROR", async () => {
      const doomed = defineSandbox({ id: "chat-killed", provider: testProvider() });
      const harness = acpCompatible({ name: "mock", command: () => MOCK_IN_CONTAINER });
      try {
        let killed = false;
        const chunks = await collect(
          chat({
            adapter: harness("mock-fast"),
            messages: [user("slow 100 100")],
            middleware: [withSandbox(doomed)],
          }),
          (chunk) => {
            if (chunk.type !== "TEXT_MESSAGE_CONTENT" || killed) return;
            killed = true;
            void containerOf("chat-killed").then((c) => c.kill());
          },
        );
        const end = terminal(chunks);
        assert.equal(end?.type, "RUN_ERROR");
        assert.equal(end?.code, "agent_exited");
        assert.match(String(end?.message), /container stopped/);
        const instance = await doomed.start();
        await assert.rejects(
          instance.spawn("true"),
          /container [0-9a-f]{12} is not running: create a new sandbox/,
        );
      } finally {
        await harness.dispose();
        await doomed.dispose();
      }
    });
  },
);

describe(
  "startAcpServerInSandbox in a docker sandbox: the agent's own WebSocket ACP server",
  { skip: engineSkip, timeout: 180_000 },
  () => {
    it("starts the server in the container and connects through the sandbox's channel", async () => {
      // The agent's server: ai-acp's WebSocket bridge in front of the bundled mock agent, run with
      // this repository mounted at the same path (the bridge needs its `ws` dependency).
      const bridge = path.join(repoRoot, "packages/ai-acp/dist/src/bin/acp-ws-bridge.js");
      const mock = Buffer.from(MOCK_IN_CONTAINER, "utf8").toString("base64");
      const port = await freePort();
      const harness = acpCompatible({
        name: "mock",
        openTransport: async ({ sandbox, harnessCwd, signal }) => {
          const server = await startAcpServerInSandbox(sandbox, {
            port,
            cwd: harnessCwd,
            command: `node ${bridge} 127.0.0.1 ${port} ${mock}`,
            readyMarker: "LISTENING",
            buildWsUrl: ({ channel, port }) => `${channel.url.replace(/^http/i, "ws")}:${port}`,
            signal,
          });
          const ws = await server.connect(signal);
          return {
            kind: "stream",
            stream: ws.stream,
            dispose: async () => {
              ws.close();
              await server.dispose();
            },
          };
        },
      });
      const sandbox = defineSandbox({
        id: "own-ws-server",
        provider: testProvider({
          mounts: [{ source: repoRoot, target: repoRoot, readOnly: true }],
          ports: [port],
        }),
      });
      try {
        const instance = await sandbox.start();
        assert.equal(instance.channel?.url, "http://127.0.0.1");
        const reached = await instance.channel!.reach(port);
        if (TEST_NETWORK === "host") assert.equal(reached, port, "host network: the port itself");
        const chunks = await collect(
          chat({
            adapter: harness("m"),
            messages: [user("echo over the container's websocket")],
            middleware: [withSandbox(sandbox)],
          }),
        );
        assert.equal(texts(chunks), "over the container's websocket", JSON.stringify(terminal(chunks)));
      } finally {
        await harness.dispose();
        await sandbox.dispose();
      }
    });
  },
);
