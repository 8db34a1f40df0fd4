import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { waitFor } from "@sandbox-agent/testkit";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { PROTOCOL_VERSION, RequestError } from "@agentclientprotocol/sdk";
import { killAll, kinds, messageTexts, startAgent, type AgentUnderTest } from "./helpers.js";

after(killAll);

async function withSession<T>(
  options: Parameters<typeof startAgent>[0],
  use: (a: AgentUnderTest, sessionId: string, cwd: string) => Promise<T>,
): Promise<T> {
  const a = startAgent(options);
  try {
    await a.initialize();
    const cwd = mkdtempSync(path.join(os.tmpdir(), "mock-agent-test-"));
    const { sessionId } = await a.agent.request("session/new", { cwd, mcpServers: [] });
    return await use(a, sessionId, cwd);
  } finally {
    await a.stop();
  }
}

async function rejectsWith(promise: Promise<unknown>, code: number): Promise<void> {
  await assert.rejects(promise, (e: unknown) => e instanceof RequestError && e.code === code);
}

describe("mock agent over stdio", { timeout: 300_000 }, () => {
  it("answers initialize with its capabilities", async () => {
    const a = startAgent();
    try {
      const res = await a.agent.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
      assert.equal(res.protocolVersion, PROTOCOL_VERSION);
      assert.equal(res.agentInfo?.name, "sandbox-agent-mock");
      assert.equal(res.agentCapabilities?.loadSession, true);
      assert.deepEqual(res.agentCapabilities?.promptCapabilities, {
        image: true,
        audio: false,
        embeddedContext: true,
      });
      assert.deepEqual(res.agentCapabilities?.mcpCapabilities, { http: true, sse: false });
      assert.ok(res.agentCapabilities?.sessionCapabilities?.list);
      assert.deepEqual(
        res.authMethods?.map((m) => m.id),
        ["mock-api-key"],
      );
    } finally {
      await a.stop();
    }
  });

  it("echoes a prompt without commands", () =>
    withSession({}, async (a, sessionId) => {
      const res = await a.agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "hello there" }],
      });
      assert.equal(res.stopReason, "end_turn");
      assert.deepEqual(messageTexts(a.updates, sessionId), ["echo: hello there"]);
    }));

  it("streams 1000 chunks in order", () =>
    withSession({}, async (a, sessionId) => {
      await a.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "chunks 1000" }] });
      const texts = messageTexts(a.updates, sessionId);
      assert.equal(texts.length, 1000);
      texts.forEach((t, i) => assert.equal(t, `chunk ${i + 1} `));
    }));

  it("runs tool, plan and think commands", () =>
    withSession({}, async (a, sessionId) => {
      await a.agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "think hmm\nplan a | b | c\ntool read open file" }],
      });
      assert.deepEqual(kinds(a.updates, sessionId), [
        "agent_thought_chunk",
        "plan",
        "tool_call",
        "tool_call_update",
        "tool_call_update",
      ]);
      const plan = a.updates[1]?.update;
      assert.ok(plan?.sessionUpdate === "plan");
      assert.deepEqual(
        plan.entries.map((e) => [e.content, e.status]),
        [
          ["a", "in_progress"],
          ["b", "pending"],
          ["c", "pending"],
        ],
      );
      const done = a.updates[4]?.update;
      assert.ok(done?.sessionUpdate === "tool_call_update");
      assert.equal(done.status, "completed");
      assert.deepEqual(done.content?.[0], {
        type: "content",
        content: { type: "text", text: "done: open file" },
      });
    }));

  for (const [answer, expected] of [
    ["allow_always", "permission: selected allow_always"],
    ["cancelled", "permission: cancelled"],
  ] as const) {
    it(`reports the permission answer ${answer}`, () =>
      withSession({ permission: answer }, async (a, sessionId) => {
        await a.agent.request("session/prompt", {
          sessionId,
          prompt: [{ type: "text", text: "permission run rm" }],
        });
        assert.deepEqual(
          a.permissionRequests[0]?.options.map((o) => o.optionId),
          ["allow_once", "allow_always", "reject_once", "reject_always"],
        );
        assert.equal(a.permissionRequests[0]?.toolCall.title, "run rm");
        assert.deepEqual(messageTexts(a.updates, sessionId), [expected]);
      }));
  }

  it("writes a file when allowed", () =>
    withSession({ permission: "allow_once" }, async (a, sessionId, cwd) => {
      await a.agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "write out/a.txt hello world" }],
      });
      assert.equal(readFileSync(path.join(cwd, "out/a.txt"), "utf8"), "hello world");
      assert.deepEqual(messageTexts(a.updates, sessionId), ["wrote out/a.txt"]);
      const call = a.updates[0]?.update;
      assert.ok(call?.sessionUpdate === "tool_call");
      assert.deepEqual(call.content?.[0], {
        type: "diff",
        path: path.join(cwd, "out/a.txt"),
        oldText: null,
        newText: "hello world",
      });
    }));

  it("does not write a file when rejected", () =>
    withSession({ permission: "reject_once" }, async (a, sessionId, cwd) => {
      writeFileSync(path.join(cwd, "kept.txt"), "old");
      await a.agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "write kept.txt new\nwrite fresh.txt x" }],
      });
      assert.equal(readFileSync(path.join(cwd, "kept.txt"), "utf8"), "old");
      assert.equal(existsSync(path.join(cwd, "fresh.txt")), false);
      assert.deepEqual(messageTexts(a.updates, sessionId), ["write rejected", "write rejected"]);
    }));

  it("ends a sleeping turn with cancelled on session/cancel", () =>
    withSession({}, async (a, sessionId) => {
      const started = Date.now();
      const turn = a.agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "echo before; sleep 600000; echo after" }],
      });
      await waitFor(() => messageTexts(a.updates, sessionId).includes("before"), 10_000, "the turn to start");
      await a.agent.notify("session/cancel", { sessionId });
      assert.equal((await turn).stopReason, "cancelled");
      assert.ok(Date.now() - started < 60_000, "the cancel cut the 10-minute sleep short");
      assert.deepEqual(messageTexts(a.updates, sessionId), ["before"]);
    }));

  it("ends the turn with the stop reason and fails with the error code", () =>
    withSession({}, async (a, sessionId) => {
      const res = await a.agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "stop max_tokens; echo never" }],
      });
      assert.equal(res.stopReason, "max_tokens");
      await rejectsWith(
        a.agent.request("session/prompt", {
          sessionId,
          prompt: [{ type: "text", text: "error -32042 boom" }],
        }),
        -32042,
      );
      await rejectsWith(
        a.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "chunks lots" }] }),
        -32602,
      );
      assert.deepEqual(messageTexts(a.updates, sessionId), []);
    }));

  it("crashes with the given exit code after flushing", async () => {
    const a = startAgent();
    await a.initialize();
    const { sessionId } = await a.agent.request("session/new", { cwd: os.tmpdir(), mcpServers: [] });
    void a.agent
      .request("session/prompt", { sessionId, prompt: [{ type: "text", text: "echo last words\ncrash 7" }] })
      .catch(() => undefined);
    assert.deepEqual(await a.exited, { code: 7, signal: null });
    assert.match(a.stdout(), /last words/);
  });

  it("close-stdout ends its output while the process lives on", async () => {
    const a = startAgent();
    await a.initialize();
    const { sessionId } = await a.agent.request("session/new", { cwd: os.tmpdir(), mcpServers: [] });
    const ended = new Promise((resolve) => a.child.stdout!.once("end", resolve));
    void a.agent
      .request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "echo last words\nclose-stdout" }],
      })
      .catch(() => undefined);
    await ended;
    assert.match(a.stdout(), /last words/);
    assert.equal(a.child.exitCode, null, "still running after closing stdout");
    a.child.kill("SIGTERM");
    assert.deepEqual(await a.exited, { code: 0, signal: null });
  });

  it("writes a raw garbage line between JSON lines", () =>
    withSession({}, async (a, sessionId) => {
      await a.agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "echo one\ngarbage NOT JSON\necho two" }],
      });
      const lines = a.stdout().trimEnd().split("\n");
      const garbage = lines.indexOf("NOT JSON");
      assert.ok(garbage > 0, a.stdout());
      for (const [i, line] of lines.entries()) if (i !== garbage) JSON.parse(line);
      assert.match(lines[garbage - 1] ?? "", /"one"/);
      assert.match(lines[garbage + 1] ?? "", /"two"/);
    }));

  it("answers unknown requests with -32601 and ignores unknown notifications", () =>
    withSession({}, async (a, sessionId) => {
      await rejectsWith(a.agent.request("_mock/unknown", {}), -32601);
      await a.agent.notify("_mock/whatever", { x: 1 });
      const res = await a.agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "echo alive" }],
      });
      assert.equal(res.stopReason, "end_turn");
      assert.deepEqual(messageTexts(a.updates, sessionId), ["alive"]);
    }));

  it("authenticates only with MOCK_API_KEY", async () => {
    const denied = startAgent({ env: { MOCK_API_KEY: undefined, MOCK_REQUIRE_AUTH: "1" } });
    const allowed = startAgent({ env: { MOCK_API_KEY: "k", MOCK_REQUIRE_AUTH: "1" } });
    try {
      await Promise.all([denied.initialize(), allowed.initialize()]);
      await rejectsWith(denied.agent.request("authenticate", { methodId: "mock-api-key" }), -32000);
      await rejectsWith(denied.agent.request("session/new", { cwd: os.tmpdir(), mcpServers: [] }), -32000);
      await rejectsWith(allowed.agent.request("authenticate", { methodId: "nope" }), -32602);
      await allowed.agent.request("authenticate", { methodId: "mock-api-key" });
      const { sessionId } = await allowed.agent.request("session/new", { cwd: os.tmpdir(), mcpServers: [] });
      assert.ok(sessionId);
    } finally {
      await Promise.all([denied.stop(), allowed.stop()]);
    }
  });
});
