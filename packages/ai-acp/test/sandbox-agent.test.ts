import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  defineSandbox,
  sandboxAgentSandbox,
  withSandbox,
  type SandboxDefinition,
} from "@sandbox-agent/ai-sandbox";
import { startServer, type RunningServer } from "@sandbox-agent/testkit";
import { chat, type StreamChunk } from "@tanstack/ai";
import { acpCompatible } from "../src/index.js";
import { customs, texts, user } from "./helpers.js";

describe("chat() through the sandbox-agent provider (real server, real HTTP)", { timeout: 300_000 }, () => {
  let server: RunningServer;
  let sandbox: SandboxDefinition;
  const mock = acpCompatible({ name: "mock" });
  before(async () => {
    server = await startServer({ token: "ai-acp-test-token" });
    sandbox = defineSandbox({
      id: "ai-acp-remote",
      provider: sandboxAgentSandbox({ baseUrl: server.baseUrl, token: "ai-acp-test-token", agent: "mock" }),
    });
  });
  after(async () => {
    await mock.dispose();
    await sandbox?.dispose();
    await server?.stop();
  });

  it("streams a turn from the server's mock agent over /v2/rpc", async () => {
    const chunks: StreamChunk[] = [];
    for await (const chunk of chat({
      adapter: mock("m"),
      messages: [user("echo remote hello; tool read x")],
      middleware: [withSandbox(sandbox)],
    })) {
      chunks.push(chunk);
    }
    assert.equal(texts(chunks), "remote hello", JSON.stringify(chunks.filter((c) => c.type === "RUN_ERROR")));
    assert.equal(customs(chunks, "mock.session-id").length, 1);
    assert.equal(chunks.at(-1)?.type, "RUN_FINISHED");
  });
});
