import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import os from "node:os";
import path from "node:path";
import type { ContentBlock } from "@agentclientprotocol/sdk";
import { waitFor } from "@sandbox-agent/testkit";
import { TINY_PNG_BASE64 } from "../src/index.js";
import {
  killAll,
  kinds,
  messageTexts,
  startAgent,
  type AgentUnderTest,
  type StartOptions,
} from "./helpers.js";

after(killAll);

interface Session {
  a: AgentUnderTest;
  sessionId: string;
  prompt(text: string | ContentBlock[], meta?: Record<string, unknown>): Promise<string>;
  texts(): string[];
}

async function withSession(options: StartOptions, use: (s: Session) => Promise<void>): Promise<void> {
  const a = startAgent(options);
  try {
    await a.initialize();
    const { sessionId } = await a.agent.request("session/new", { cwd: os.tmpdir(), mcpServers: [] });
    const prompt = async (text: string | ContentBlock[], meta?: Record<string, unknown>): Promise<string> => {
      const blocks: ContentBlock[] = typeof text === "string" ? [{ type: "text", text }] : text;
      return (await a.agent.request("session/prompt", { sessionId, prompt: blocks, _meta: meta })).stopReason;
    };
    await use({ a, sessionId, prompt, texts: () => messageTexts(a.updates, sessionId) });
  } finally {
    await a.stop();
  }
}

describe("script commands", { timeout: 300_000 }, () => {
  it("image, messages, bigline, json, env, meta, blocks", () =>
    withSession({ env: { MOCK_SET: "yes" } }, async (s) => {
      await s.prompt(
        'image\nmessages\nbigline 100000\njson {"x": [1; 2]}\nenv MOCK_SET\nenv MOCK_NOT_SET_XYZ\nmeta',
        { trace: "t1" },
      );
      const updates = s.a.updates.map((n) => n.update);
      const first = updates[0];
      assert.ok(first?.sessionUpdate === "agent_message_chunk" && first.content.type === "image");
      assert.equal(first.content.data, TINY_PNG_BASE64);
      const ids = updates
        .slice(1, 3)
        .map((u) => (u.sessionUpdate === "agent_message_chunk" ? u.messageId : undefined));
      assert.ok(ids[0] && ids[1] && ids[0] !== ids[1]);
      const texts = s.texts();
      assert.equal(texts[2]?.length, 100000);
      assert.deepEqual(texts.slice(3), [
        '{"x": [1; 2]}',
        "MOCK_SET=yes",
        "MOCK_NOT_SET_XYZ=(unset)",
        '{"trace":"t1"}',
      ]);
      await s.prompt([
        { type: "text", text: "blocks" },
        { type: "image", mimeType: "image/png", data: TINY_PNG_BASE64 },
        { type: "resource_link", uri: "file:///a.txt", name: "a" },
      ]);
      assert.equal(s.texts().at(-1), "blocks: text, image(image/png), resource_link(file:///a.txt)");
    }));

  it("usage, title, commands, fail-tool", () =>
    withSession({}, async (s) => {
      await s.prompt("usage; title My Title; commands; fail-tool broken");
      assert.deepEqual(kinds(s.a.updates, s.sessionId), [
        "usage_update",
        "session_info_update",
        "available_commands_update",
        "tool_call",
        "tool_call_update",
      ]);
      const last = s.a.updates.at(-1)?.update;
      assert.ok(last?.sessionUpdate === "tool_call_update" && last.status === "failed");
      const listed = await s.a.agent.request("session/list", {});
      assert.equal(listed.sessions.find((x) => x.sessionId === s.sessionId)?.title, "My Title");
    }));

  it("usage USED sets the usage_update; turn-usage the turn's PromptResponse.usage", () =>
    withSession({}, async (s) => {
      const plain = await s.a.agent.request("session/prompt", {
        sessionId: s.sessionId,
        prompt: [{ type: "text", text: "usage 1234" }],
      });
      assert.deepEqual(plain, { stopReason: "end_turn" }, "no usage unless the script sets it");
      const update = s.a.updates.at(-1)?.update;
      assert.ok(update?.sessionUpdate === "usage_update");
      assert.deepEqual([update.used, update.size], [1234, 200_000]);
      const counted = await s.a.agent.request("session/prompt", {
        sessionId: s.sessionId,
        prompt: [{ type: "text", text: "turn-usage 10 20 5; stop max_tokens" }],
      });
      assert.deepEqual(counted, {
        stopReason: "max_tokens",
        usage: { inputTokens: 10, outputTokens: 20, thoughtTokens: 5, totalTokens: 35 },
      });
    }));

  it("unknown-update is raw on stdout and ignored by the client", () =>
    withSession({}, async (s) => {
      assert.equal(await s.prompt("unknown-update\necho after"), "end_turn");
      assert.match(s.a.stdout(), /"sessionUpdate":"_vendor_x"/);
      assert.deepEqual(s.texts(), ["after"]);
    }));

  it("ext notifications and ext requests", () =>
    withSession({}, async (s) => {
      await s.prompt('ext _mock/ping {"n": 1}\next-request _mock/echo {"q": 2}\next-request _mock/missing');
      assert.deepEqual(s.a.otherNotifications, [{ method: "_mock/ping", params: { n: 1 } }]);
      const [result, missing] = s.texts();
      assert.equal(result, 'ext-request result: {"echoed":{"q":2}}');
      assert.match(missing ?? "", /^ext-request error: -32601 .*_mock\/missing/);
    }));

  it("read uses the client's fs when it has one; fs-write and terminal need the capability", async () => {
    await withSession({ readTextFile: (p) => `content of ${path.basename(p)}` }, async (s) => {
      await s.prompt("read notes.txt");
      assert.deepEqual(s.texts(), ["read notes.txt: content of notes.txt"]);
    });
    await withSession({}, async (s) => {
      await s.prompt("read notes.txt; fs-write notes.txt x; terminal echo hi; terminal-kill sleep 9");
      assert.deepEqual(s.texts(), [
        "fs not supported",
        "fs not supported",
        "terminal not supported",
        "terminal not supported",
      ]);
    });
  });

  it("cancels slow, hang and a pending permission", () =>
    withSession({ permission: () => new Promise(() => {}) }, async (s) => {
      // Each script is cancelled once it shows it is running: a first chunk, a message, the request.
      const running: Array<[string, () => boolean]> = [
        ["slow 100 50", () => s.texts().includes("chunk 1 ")],
        ["echo hanging; hang", () => s.texts().includes("hanging")],
        ["permission wait forever", () => s.a.permissionRequests.length === 1],
      ];
      for (const [script, started] of running) {
        const turn = s.prompt(script);
        await waitFor(started, 10_000, `${script} to run`);
        await s.a.agent.notify("session/cancel", { sessionId: s.sessionId });
        assert.equal(await turn, "cancelled", script);
      }
      const slowChunks = s.texts().filter((t) => t.startsWith("chunk "));
      assert.ok(slowChunks.length >= 1 && slowChunks.length < 100);
      assert.equal(s.texts().at(-1), "permission: cancelled");
    }));

  it("writes 10 MB to stderr without blocking", () =>
    withSession({}, async (s) => {
      await s.prompt("stderr 10485760\necho done");
      assert.equal(s.a.stderr().length, 10485760);
      assert.deepEqual(s.texts(), ["done"]);
    }));

  it("set_mode, set_config_option, fork and close", () =>
    withSession({}, async (s) => {
      await s.a.agent.request("session/set_mode", { sessionId: s.sessionId, modeId: "plan" });
      assert.deepEqual(kinds(s.a.updates, s.sessionId), ["current_mode_update", "config_option_update"]);
      const set = await s.a.agent.request("session/set_config_option", {
        sessionId: s.sessionId,
        configId: "model",
        value: "mock-smart",
      });
      assert.deepEqual(
        set.configOptions.map((o) => [o.id, o.currentValue]),
        [
          ["mode", "plan"],
          ["model", "mock-smart"],
          ["verbosity", "normal"],
        ],
      );
      await assert.rejects(
        s.a.agent.request("session/set_config_option", {
          sessionId: s.sessionId,
          configId: "model",
          value: "gpt",
        }),
      );
      await s.prompt("echo before fork");
      const fork = await s.a.agent.request<{ sessionId: string }>("session/fork", {
        sessionId: s.sessionId,
        cwd: os.tmpdir(),
        mcpServers: [],
      });
      assert.notEqual(fork.sessionId, s.sessionId);
      await s.a.agent.request("session/load", {
        sessionId: fork.sessionId,
        cwd: os.tmpdir(),
        mcpServers: [],
      });
      assert.deepEqual(messageTexts(s.a.updates, fork.sessionId), ["before fork"]);
      const turn = s.prompt("echo hanging; hang");
      await waitFor(() => s.texts().includes("hanging"), 10_000, "the hanging turn to start");
      await s.a.agent.request("session/close", { sessionId: s.sessionId });
      assert.equal(await turn, "cancelled");
    }));
});
