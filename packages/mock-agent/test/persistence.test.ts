import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { RequestError } from "@agentclientprotocol/sdk";
import { killAll, kinds, messageTexts, startAgent } from "./helpers.js";

after(killAll);

describe("session persistence across processes", { timeout: 300_000 }, () => {
  it("loads (with replay), resumes and lists sessions of a previous process", async () => {
    const env = { MOCK_AGENT_STATE_DIR: mkdtempSync(path.join(os.tmpdir(), "mock-agent-state-")) };
    const cwdA = mkdtempSync(path.join(os.tmpdir(), "mock-a-"));
    const cwdB = mkdtempSync(path.join(os.tmpdir(), "mock-b-"));
    const first = startAgent({ env });
    await first.initialize();
    const { sessionId } = await first.agent.request("session/new", { cwd: cwdA, mcpServers: [] });
    const other = await first.agent.request("session/new", { cwd: cwdB, mcpServers: [] });
    await first.agent.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "echo remembered\ntool read look" }],
    });
    await first.stop();

    const second = startAgent({ env });
    try {
      await second.initialize();
      const listed = await second.agent.request("session/list", {});
      assert.deepEqual(
        new Set(listed.sessions.map((s) => s.sessionId)),
        new Set([sessionId, other.sessionId]),
      );
      const filtered = await second.agent.request("session/list", { cwd: cwdA });
      assert.deepEqual(
        filtered.sessions.map((s) => [s.sessionId, s.title]),
        [[sessionId, "echo remembered tool read look"]],
      );

      await second.agent.request("session/load", { sessionId, cwd: cwdA, mcpServers: [] });
      assert.deepEqual(kinds(second.updates, sessionId), [
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "tool_call_update",
      ]);
      assert.deepEqual(messageTexts(second.updates, sessionId), ["remembered"]);

      const before = second.updates.length;
      await second.agent.request("session/resume", { sessionId: other.sessionId, cwd: cwdB });
      assert.equal(second.updates.length, before);
      await assert.rejects(
        second.agent.request("session/load", { sessionId: "missing", cwd: cwdA, mcpServers: [] }),
        (e: unknown) => e instanceof RequestError && e.code === -32002,
      );
    } finally {
      await second.stop();
    }
  });
});
