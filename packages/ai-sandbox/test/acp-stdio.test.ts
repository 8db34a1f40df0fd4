import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { client, ndJsonStream, type SessionNotification } from "@agentclientprotocol/sdk";
import { mockAgentBin } from "@sandbox-agent/testkit";
import { createSecrets, defineSandbox, defineWorkspace, localProcessSandbox } from "../src/index.js";

const definition = defineSandbox({
  id: "acp-stdio",
  provider: localProcessSandbox(),
  workspace: defineWorkspace({ secrets: createSecrets({ MOCK_API_KEY: "mock-key" }) }),
});
after(() => definition.dispose());

describe("a real ACP agent over sandbox process stdio", { timeout: 30_000 }, () => {
  it("speaks ACP through spawn() streams, sees declared secrets and not host variables", async () => {
    process.env["SECRET_HOST_VAR"] = "leak";
    const instance = await definition.start();
    const proc = await instance.spawn(`'${process.execPath}' '${mockAgentBin}'`);
    delete process.env["SECRET_HOST_VAR"];
    const updates: SessionNotification[] = [];
    const connection = client({ name: "ai-sandbox-test" })
      .onNotification("session/update", ({ params }) => void updates.push(params))
      .onRequest("session/request_permission", () => ({
        outcome: { outcome: "selected", optionId: "allow_once" },
      }))
      .connect(ndJsonStream(proc.stdin, proc.stdout));
    await connection.agent.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
    await connection.agent.request("authenticate", { methodId: "mock-api-key" });
    const { sessionId } = await connection.agent.request("session/new", {
      cwd: instance.workdir,
      mcpServers: [],
    });
    const result = await connection.agent.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "env MOCK_API_KEY; env SECRET_HOST_VAR; write made.txt hello" }],
    });
    assert.equal(result.stopReason, "end_turn");
    const texts = updates.flatMap((n) =>
      n.update.sessionUpdate === "agent_message_chunk" && n.update.content.type === "text"
        ? [n.update.content.text]
        : [],
    );
    assert.ok(texts.includes("MOCK_API_KEY=mock-key"), texts.join("|"));
    assert.ok(texts.includes("SECRET_HOST_VAR=(unset)"), texts.join("|"));
    assert.equal(Buffer.from((await instance.files.readFile("made.txt")) ?? []).toString(), "hello");
    await proc.kill();
    assert.equal(proc.stderrTail().includes("Error"), false, proc.stderrTail());
  });
});
