import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import {
  createFleet,
  defineSandbox,
  defineWorkspace,
  localProcessSandbox,
  withSandbox,
  type Fleet,
} from "@sandbox-agent/ai-sandbox";
import { memorySessionStore } from "@sandbox-agent/session-store";
import { tempDir } from "@sandbox-agent/testkit";
import { chat, type StreamChunk } from "@tanstack/ai";
import { acpCompatible } from "../src/index.js";
import { customs, mockCommand, texts, user } from "./helpers.js";

const parentDir = tempDir("ai-acp-fleet-");
// The mock agent keeps its sessions here, so an agent process started by another replica can load them.
const stateDir = tempDir("ai-acp-fleet-state-");
const store = memorySessionStore();
const fleets: Fleet[] = [];
const disposers: Array<() => Promise<void>> = [];
after(async () => {
  await Promise.all(disposers.map((dispose) => dispose()));
  await fleets[0]?.destroy("thread-box");
  await Promise.all(fleets.map((fleet) => fleet.close()));
  rmSync(parentDir, { recursive: true, force: true });
  rmSync(stateDir, { recursive: true, force: true });
});

/** One application replica: its own fleet, sandbox definition and harness, on the shared store. */
function replica(name: string): {
  turn(messages: Parameters<typeof chat>[0]["messages"]): Promise<StreamChunk[]>;
  prompts: Array<{ resumed: boolean; text: string }>;
} {
  const fleet = createFleet({ provider: localProcessSandbox({ parentDir }), store, owner: name });
  fleets.push(fleet);
  const sandbox = defineSandbox({
    id: "thread-box",
    fleet,
    workspace: defineWorkspace({ setup: "echo ran >> setup.log", env: { MOCK_AGENT_STATE_DIR: stateDir } }),
  });
  const prompts: Array<{ resumed: boolean; text: string }> = [];
  const harness = acpCompatible({
    name: "mock",
    command: () => mockCommand(),
    store,
    buildPrompt: ({ messages, resumed }) => {
      const text = String(messages.at(-1)?.content ?? "");
      prompts.push({ resumed, text });
      return text;
    },
  });
  disposers.push(
    () => harness.dispose(),
    () => sandbox.dispose(),
  );
  return {
    prompts,
    turn: async (messages) => {
      const stream = chat({
        adapter: harness("mock-fast"),
        messages,
        threadId: "thread-1",
        middleware: [withSandbox(sandbox)],
      } as unknown as Parameters<typeof chat>[0]) as AsyncIterable<StreamChunk>;
      const chunks: StreamChunk[] = [];
      for await (const chunk of stream) chunks.push(chunk);
      return chunks;
    },
  };
}

const sessionIdOf = (chunks: StreamChunk[]) =>
  (customs(chunks, "mock.session-id")[0] as { sessionId: string }).sessionId;

describe("a chat thread on a fleet's sandbox, continued by another replica", { timeout: 60_000 }, () => {
  it("the second replica reattaches to the sandbox and reopens the thread's recorded agent session", async () => {
    const first = replica("replica-a");
    const one = await first.turn([user("echo first; sleep 100")]);
    assert.equal(texts(one), "first");
    const textAt = (one.find((c) => c.type === "TEXT_MESSAGE_CONTENT") as { timestamp: number }).timestamp;
    const agentSessionId = sessionIdOf(one);
    const recorded = await store.sessions.get("thread-1");
    assert.equal(recorded?.agentSessionId, agentSessionId);
    assert.equal(recorded?.agent, "mock");
    assert.equal(recorded?.sandboxKey, "thread-box");
    const sandbox = await store.sandboxes.get("thread-box");
    assert.equal(sandbox?.status, "running");
    assert.ok(sandbox!.lastActiveAt > textAt, "the end of the turn counts as activity for the idle reaper");

    const second = replica("replica-b");
    const two = await second.turn([
      user("echo first"),
      { role: "assistant", content: "first" },
      user("echo second"),
    ]);
    assert.equal(texts(two), "second");
    assert.equal(sessionIdOf(two), agentSessionId, "the same agent session, reopened");
    assert.deepEqual(customs(two, "mock.warning"), []);
    assert.deepEqual(
      second.prompts,
      [{ resumed: true, text: "echo second" }],
      "only the new message is sent",
    );
    assert.equal(
      readFileSync(path.join(parentDir, "thread-box", "workspace", "setup.log"), "utf8"),
      "ran\n",
      "the workspace was bootstrapped once, by the replica that created the sandbox",
    );
  });
});
