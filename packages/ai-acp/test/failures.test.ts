import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { provideSandbox, withSandbox } from "@sandbox-agent/ai-sandbox";
import { chat, type CapabilityContext, type StreamChunk } from "@tanstack/ai";
import { resolveDebugOption } from "@tanstack/ai/adapter-internals";
import { waitFor } from "@sandbox-agent/testkit";
import {
  customs,
  mockCommand,
  ofType,
  proxiedMockCommand,
  run,
  testBed,
  texts,
  user,
  type TestBed,
} from "./helpers.js";

function terminal(chunks: StreamChunk[]): Record<string, unknown> | undefined {
  return chunks
    .filter((c) => c.type === "RUN_ERROR" || c.type === "RUN_FINISHED")
    .at(-1) as unknown as Record<string, unknown>;
}

describe("failures are reported, bounded and never silent", { timeout: 300_000 }, () => {
  let bed: TestBed;
  before(async () => {
    bed = await testBed("ai-acp-failures");
  });
  after(() => bed.close());

  it("a mid-turn crash reports the exit code and the stderr tail", async () => {
    const chunks = await run(bed, bed.harness()("m"), "echo before; stderr 100; crash 3");
    const error = terminal(chunks);
    assert.equal(error?.type, "RUN_ERROR");
    assert.equal(error?.code, "agent_exited");
    assert.match(String(error?.message), /exit code 3/);
    assert.match(String(error?.message), /xxxx/, "stderr tail included");
  });

  it("initialize has a timeout", async () => {
    const mock = bed.harness({ command: () => mockCommand("--hang-initialize"), initializeTimeoutMs: 500 });
    const started = Date.now();
    const error = terminal(await run(bed, mock("m"), "echo never"));
    assert.equal(error?.code, "initialize_timeout");
    assert.ok(Date.now() - started < 5_000);
  });

  it("a turn has a timeout and is cancelled on the agent", async () => {
    const log = join(bed.root, "turn-timeout.log");
    const mock = bed.harness({ command: () => mockCommand("--stdin-log", log), turnTimeoutMs: 500 });
    const error = terminal(await run(bed, mock("m"), "hang"));
    assert.equal(error?.code, "turn_timeout");
    assert.match(await readFile(log, "utf8"), /"session\/cancel"/);
  });

  it("an unsupported protocol version is refused", async () => {
    const mock = bed.harness({ command: () => mockCommand("--protocol-version", "7") });
    const error = terminal(await run(bed, mock("m"), "echo x"));
    assert.equal(error?.code, "unsupported_protocol_version");
  });

  it("abort sends session/cancel, answers the held permission, closes tool calls and ends with a terminal event", async () => {
    const log = join(bed.root, "abort.log");
    const controller = new AbortController();
    const mock = bed.harness({
      command: () => mockCommand("--stdin-log", log),
      // A human who never answers; the run is aborted while the handler waits.
      onPermissionRequest: () => {
        controller.abort();
        return new Promise(() => undefined);
      },
    });
    const adapter = mock("m");
    const ctx: CapabilityContext = {
      capabilities: { markProvided: () => undefined, has: () => true },
    } as unknown as CapabilityContext;
    provideSandbox(ctx, await bed.sandbox.start());
    const chunks: StreamChunk[] = [];
    for await (const chunk of adapter.chatStream({
      model: "m",
      messages: [user("tool read a; permission risky")],
      capabilities: ctx,
      request: { signal: controller.signal },
      logger: resolveDebugOption(false),
    })) {
      chunks.push(chunk as StreamChunk);
    }
    const last = terminal(chunks);
    assert.equal(last?.type, "RUN_FINISHED");
    assert.equal((last?.result as { stopReason: string }).stopReason, "cancelled");
    const started = ofType(chunks, "TOOL_CALL_START").map((c) => c.toolCallId);
    const ended = new Set(ofType(chunks, "TOOL_CALL_END").map((c) => c.toolCallId));
    assert.ok(started.length >= 2);
    for (const id of started) assert.ok(ended.has(id), `tool call ${String(id)} closed`);
    // The agent's stdin log is written as the bytes arrive: the answer may land just after the run ends.
    const sent = await waitFor(
      async () => {
        const text = await readFile(log, "utf8");
        return /"outcome":"cancelled"/.test(text) ? text : undefined;
      },
      10_000,
      "the held permission to be answered cancelled",
    );
    assert.match(sent, /"session\/cancel"/);
  });

  it("abort through chat() cancels the agent's turn", async () => {
    const log = join(bed.root, "abort-chat.log");
    const mock = bed.harness({ command: () => mockCommand("--stdin-log", log) });
    const controller = new AbortController();
    const stream = chat({
      adapter: mock("m"),
      messages: [user("echo started; hang")],
      middleware: [withSandbox(bed.sandbox)],
      abortController: controller,
    });
    for await (const chunk of stream) if (chunk.type === "TEXT_MESSAGE_CONTENT") controller.abort();
    // The engine stops reading at once; the adapter sends the cancel on its own.
    await waitFor(
      async () => (await readFile(log, "utf8")).includes('"session/cancel"'),
      10_000,
      "session/cancel",
    );
  });

  it("a failed resume is visible as a warning and the turn still runs", async () => {
    const chunks = await run(bed, bed.harness()("m"), "echo fresh", {
      modelOptions: { sessionId: "no-such-session" },
    });
    const warnings = customs(chunks, "mock.warning") as Array<{ message: string }>;
    assert.match(warnings[0]?.message ?? "", /could not resume session no-such-session/);
    assert.equal(texts(chunks), "fresh");
  });

  it("resumes with session/resume, never session/load, when loadSession is not advertised", async () => {
    const state = join(bed.root, "mock-state");
    const log = join(bed.root, "resume.log");
    const env = { MOCK_AGENT_STATE_DIR: state };
    const first = await run(bed, bed.harness({ env })("m"), "echo one");
    const sessionId = (customs(first, "mock.session-id")[0] as { sessionId: string }).sessionId;
    const noLoad = bed.harness({
      env,
      command: () => proxiedMockCommand({ loadSession: false }, "--stdin-log", log),
    });
    const second = await run(bed, noLoad("m"), "echo two", { modelOptions: { sessionId } });
    assert.deepEqual(customs(second, "mock.warning"), []);
    assert.equal((customs(second, "mock.session-id")[0] as { sessionId: string }).sessionId, sessionId);
    const sent = await readFile(log, "utf8");
    assert.doesNotMatch(sent, /"session\/load"/);
    assert.match(sent, /"session\/resume"/);
  });

  it("sends image blocks only when promptCapabilities.image is advertised", async () => {
    const image = { type: "image", source: { type: "data", value: "iVBORw0KGgo=", mimeType: "image/png" } };
    const messages = [{ role: "user", content: [{ type: "text", content: "blocks" }, image] }];
    const withImage = await run(bed, bed.harness()("m"), "", { messages });
    assert.match(texts(withImage), /blocks: text, image\(image\/png\)/);
    const noImages = bed.harness({
      command: () => proxiedMockCommand({ promptCapabilities: { image: false } }),
    });
    const without = await run(bed, noImages("m"), "", { messages });
    assert.doesNotMatch(texts(without), /image\(/);
    assert.match(texts(without), /blocks: text, text/);
  });

  it("the host environment does not leak into the agent; declared env does", async () => {
    process.env["AI_ACP_HOST_SECRET"] = "leaked";
    try {
      const mock = bed.harness({ env: { DECLARED_VAR: "yes" } });
      const chunks = await run(bed, mock("m"), "env AI_ACP_HOST_SECRET; env DECLARED_VAR");
      assert.match(texts(chunks), /AI_ACP_HOST_SECRET=\(unset\)/);
      assert.match(texts(chunks), /DECLARED_VAR=yes/);
    } finally {
      delete process.env["AI_ACP_HOST_SECRET"];
    }
  });

  it("authMode api-key calls authenticate with authMethodId; host skips it", async () => {
    const ok = bed.harness({
      authMethodId: "mock-api-key",
      env: { MOCK_API_KEY: "k", MOCK_REQUIRE_AUTH: "1" },
    });
    assert.equal(texts(await run(bed, ok("m"), "echo authed")), "authed");
    const missingKey = bed.harness({ authMethodId: "mock-api-key" });
    assert.equal(terminal(await run(bed, missingKey("m"), "echo x"))?.code, "authenticate_failed");
    const unknown = bed.harness({ authMethodId: "nope" });
    assert.equal(terminal(await run(bed, unknown("m"), "echo x"))?.code, "auth_method_unknown");
    const host = bed.harness({
      authMode: "host",
      authMethodId: "mock-api-key",
      env: { MOCK_REQUIRE_AUTH: "1" },
    });
    assert.equal(
      terminal(await run(bed, host("m"), "echo x"))?.code,
      "session_failed",
      "no authenticate was sent",
    );
  });
});
