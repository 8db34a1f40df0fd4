import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { SandboxAgentClient } from "sandbox-agent";
import {
  docker,
  engineSkip,
  GVISOR_HOST,
  gvisorMissing,
  RUN_ID,
  runIn,
  testProvider,
  waitNoContainers,
} from "./helpers.js";
import { needService } from "@sandbox-agent/testkit";
import type { DockerSandboxInstance } from "../src/index.js";

/** A client of the server inside `instance`, approving every permission request. */
function clientOf(instance: DockerSandboxInstance, agent = "mock"): SandboxAgentClient {
  return new SandboxAgentClient({
    baseUrl: instance.server.baseUrl,
    token: instance.server.token,
    agent,
    onPermissionRequest: () => ({ outcome: "selected", optionId: "allow_once" }),
  });
}

/** Runs one prompt and returns the agent's text. */
async function turn(
  client: SandboxAgentClient,
  prompt: string,
  signal?: AbortSignal,
): Promise<{ text: string; stopReason: string }> {
  const { sessionId } = await client.newSession({ cwd: "/workspace" });
  let text = "";
  const off = client.on("update", ({ update }) => {
    if (update.sessionUpdate === "agent_message_chunk" && update.content.type === "text")
      text += update.content.text;
  });
  try {
    const { stopReason } = await client.prompt({ sessionId, prompt, ...(signal ? { signal } : {}) });
    return { text, stopReason };
  } finally {
    off();
  }
}

describe(
  "SandboxAgentClient against the server inside a container",
  { skip: engineSkip, timeout: 180_000 },
  () => {
    after(() => waitNoContainers());

    it("runs turns, reaches the container's files, cancels, and reports a container killed mid-turn", async () => {
      const instance = await testProvider().create({ id: "sdk", env: {} });
      const client = clientOf(instance);
      try {
        const first = await turn(client, "echo hi from the container; write sdk.txt written by the agent");
        assert.deepEqual(first, { text: "hi from the containerwrote sdk.txt", stopReason: "end_turn" });
        assert.equal(
          Buffer.from(await client.fs.readFile("/workspace/sdk.txt")).toString(),
          "written by the agent",
        );
        assert.equal((await runIn(instance, "cat sdk.txt")).stdout, "written by the agent");

        const controller = new AbortController();
        const cancelled = turn(client, "echo started; hang", controller.signal);
        setTimeout(() => controller.abort(), 300);
        assert.equal((await cancelled).stopReason, "cancelled");

        const doomed = turn(client, "slow 100 100");
        setTimeout(() => void docker.getContainer(instance.containerId).kill(), 500);
        await assert.rejects(doomed, (error: Error) => {
          assert.ok(error.message.length > 0);
          return true;
        });
      } finally {
        await client.dispose();
        await instance.dispose();
      }
    });

    it("opens a terminal in the container through the SDK, and serves the inspector page", async () => {
      const instance = await testProvider().create({ id: "sdk-terminal", env: {} });
      const client = new SandboxAgentClient({
        baseUrl: instance.server.baseUrl,
        token: instance.server.token,
        agent: "mock",
        autoConnect: false,
      });
      try {
        // A terminal is script(1) on a pseudo-terminal of the container, sized with stty.
        const proc = await client.processes.create({ command: "sh", tty: true, cols: 100, rows: 30 });
        const terminal = await client.processes.terminal(proc.id);
        let output = "";
        const reading = (async () => {
          const decoder = new TextDecoder();
          for await (const bytes of terminal.readable) output += decoder.decode(bytes, { stream: true });
        })();
        terminal.write("stty size; tty; exit 7\r");
        assert.deepEqual(await terminal.exited, { exitCode: 7, signal: null });
        await reading;
        assert.match(output, /^30 100\r?$/m, output);
        assert.match(output, /^\/dev\/pts\/\d+\r?$/m, output);

        const page = await fetch(`${instance.server.baseUrl}/ui/`);
        assert.equal(page.status, 200);
        assert.match(await page.text(), /<script type="module"/);
      } finally {
        await client.dispose();
        await instance.dispose();
      }
    });

    it("10 sandboxes at once, each with a turn of its own", async () => {
      const provider = testProvider();
      const instances = await Promise.all(
        Array.from({ length: 10 }, (_, i) => provider.create({ id: `sdk-many-${i}`, env: {} })),
      );
      const clients = instances.map((instance) => clientOf(instance));
      try {
        const answers = await Promise.all(clients.map((client, i) => turn(client, `echo sandbox ${i}`)));
        assert.deepEqual(
          answers.map((a) => a.text),
          Array.from({ length: 10 }, (_, i) => `sandbox ${i}`),
        );
      } finally {
        await Promise.all(clients.map((client) => client.dispose()));
        await Promise.all(instances.map((instance) => instance.dispose()));
      }
    });
  },
);

const gvisor = engineSkip ? undefined : await gvisorMissing();

describe(
  "gVisor (runsc)",
  { skip: engineSkip || needService("gVisor runtime", gvisor), timeout: 120_000 },
  () => {
    after(() => waitNoContainers());

    it("runs the server and the agent under gVisor's kernel", async () => {
      const instance = await testProvider({
        runtime: "runsc",
        ...(GVISOR_HOST ? { socket: GVISOR_HOST } : {}),
      }).create({ id: `gvisor-${RUN_ID}`, env: {} });
      const client = clientOf(instance);
      try {
        // gVisor reports its own kernel version (4.4.0), not this machine's.
        const kernel = (await runIn(instance, "uname -r")).stdout.trim();
        assert.notEqual(kernel, (await import("node:os")).release());
        assert.match((await runIn(instance, "dmesg 2>/dev/null | head -1")).stdout, /gVisor|Starting/i);
        assert.deepEqual(await turn(client, "echo under gvisor"), {
          text: "under gvisor",
          stopReason: "end_turn",
        });
      } finally {
        await client.dispose();
        await instance.dispose();
      }
    });
  },
);
