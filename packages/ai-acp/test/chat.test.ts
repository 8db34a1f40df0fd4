import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { verifyEvents, type BaseEvent } from "@ag-ui/client";
import { withSandbox } from "@sandbox-agent/ai-sandbox";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { chat, type StreamChunk } from "@tanstack/ai";
import { from, lastValueFrom, toArray } from "rxjs";
import { z } from "zod";
import { customs, mockCommand, ofType, quote, run, testBed, texts, user, type TestBed } from "./helpers.js";

describe("chat() end to end with the mock agent in a local-process sandbox", { timeout: 300_000 }, () => {
  let bed: TestBed;
  before(async () => {
    bed = await testBed("ai-acp-chat");
  });
  after(() => bed.close());

  it("streams text, reasoning, tool calls, plan and session id", async () => {
    const mock = bed.harness({ planEventName: "mock.plan" });
    const chunks = await run(bed, mock("m"), "think pondering; echo hello; tool read notes.txt; plan a | b");
    assert.equal(texts(chunks), "hello");
    assert.ok(ofType(chunks, "REASONING_MESSAGE_CONTENT").some((c) => c.delta === "pondering"));
    const start = ofType(chunks, "TOOL_CALL_START")[0];
    assert.ok(start, "a tool call was streamed");
    assert.equal(ofType(chunks, "TOOL_CALL_RESULT")[0]?.toolCallId, start.toolCallId);
    assert.deepEqual(
      (customs(chunks, "mock.plan")[0] as { entries: Array<{ content: string }> }).entries.map(
        (e) => e.content,
      ),
      ["a", "b"],
    );
    const [session] = customs(chunks, "mock.session-id") as Array<{ sessionId: string }>;
    assert.match(session?.sessionId ?? "", /\S+/);
    const last = chunks[chunks.length - 1];
    assert.equal(last?.type, "RUN_FINISHED");
  });

  it("puts each tool call's status, kind, title, content, locations and raw output in TOOL_CALL_RESULT", async () => {
    const chunks = await run(
      bed,
      bed.harness()("m"),
      "tool read notes.txt; fail-tool broken; write out.txt hello",
    );
    const results = new Map(
      ofType(chunks, "TOOL_CALL_RESULT").map((c) => [c.toolCallId, JSON.parse(String(c.content)) as unknown]),
    );
    const [read, failed, write] = ofType(chunks, "TOOL_CALL_START").map((c) => results.get(c.toolCallId));
    assert.deepEqual(read, {
      status: "completed",
      kind: "read",
      title: "notes.txt",
      content: [{ type: "content", content: { type: "text", text: "done: notes.txt" } }],
      locations: [],
      rawOutput: { ok: true, title: "notes.txt" },
    });
    assert.deepEqual(failed, {
      status: "failed",
      kind: "other",
      title: "broken",
      content: [{ type: "content", content: { type: "text", text: "failed: broken" } }],
      locations: [],
      rawOutput: { ok: false, error: "mock failure" },
    });
    const file = join((await bed.sandbox.start()).workdir, "out.txt");
    assert.deepEqual(write, {
      status: "completed",
      kind: "edit",
      title: "write out.txt",
      // The diff of the tool_call survives the later update that carries no content.
      content: [{ type: "diff", path: file, oldText: null, newText: "hello" }],
      locations: [{ path: file }],
      rawOutput: { path: file, bytes: 5 },
    });
  });

  it("emits each plan update as a full replacement of the previous plan", async () => {
    const mock = bed.harness({ planEventName: "mock.plan" });
    const chunks = await run(bed, mock("m"), "plan look | answer; echo working; plan answer");
    const plans = (
      customs(chunks, "mock.plan") as Array<{ entries: Array<{ content: string; status: string }> }>
    ).map((plan) => plan.entries.map((e) => `${e.content}:${e.status}`));
    assert.deepEqual(plans, [["look:in_progress", "answer:pending"], ["answer:in_progress"]]);
  });

  it("passes @ag-ui/client verifyEvents (no TOOL_CALL_ARGS after TOOL_CALL_END)", async () => {
    const mock = bed.harness();
    const chunks = await run(bed, mock("m"), "messages; tool edit a; fail-tool b; think x; echo done");
    const verified = await lastValueFrom(
      from(chunks as unknown as BaseEvent[]).pipe(verifyEvents(), toArray()),
    );
    assert.equal(verified.length, chunks.length);
  });

  it("survives unknown update variants and hands vendor notifications to onExtNotification", async () => {
    const seen: Array<{ method: string; params: unknown }> = [];
    const mock = bed.harness({ onExtNotification: (n) => seen.push(n) });
    const chunks = await run(bed, mock("m"), 'unknown-update; ext _mock/ping {"n":1}; echo still here');
    assert.equal(texts(chunks), "still here");
    assert.deepEqual(seen, [{ method: "_mock/ping", params: { n: 1 } }]);
  });

  it("renders two ACP messageIds as two text messages", async () => {
    const chunks = await run(bed, bed.harness()("m"), "messages");
    const starts = ofType(chunks, "TEXT_MESSAGE_START");
    assert.equal(starts.length, 2);
    assert.notEqual(starts[0]?.messageId, starts[1]?.messageId);
  });

  it("maps non-text agent content to <name>.message-content", async () => {
    const chunks = await run(bed, bed.harness()("m"), "image");
    const [value] = customs(chunks, "mock.message-content") as Array<{ content: { type: string } }>;
    assert.equal(value?.content.type, "image");
  });

  it("maps the five stop reasons distinctly", async () => {
    const mock = bed.harness({ refusalMessage: "Mock refused." });
    const terminal = async (reason: string): Promise<StreamChunk | undefined> => {
      const chunks = await run(bed, mock("m"), `echo x; stop ${reason}`);
      return chunks.filter((c) => c.type === "RUN_FINISHED" || c.type === "RUN_ERROR").at(-1);
    };
    const refusal = await terminal("refusal");
    assert.equal(refusal?.type, "RUN_ERROR");
    assert.equal((refusal as { message: string }).message, "Mock refused.");
    const seen = new Map<string, string>();
    for (const reason of ["end_turn", "max_tokens", "max_turn_requests", "cancelled"]) {
      const chunk = await terminal(reason);
      assert.equal(chunk?.type, "RUN_FINISHED", reason);
      const { result, metadata } = chunk as {
        result: { stopReason: string };
        metadata?: { tanstack?: { finishReason?: string | null } };
      };
      assert.equal(result.stopReason, reason);
      // The engine moves the non-spec finishReason under metadata.tanstack.
      seen.set(reason, String(metadata?.tanstack?.finishReason));
    }
    assert.equal(seen.get("end_turn"), "stop");
    assert.equal(seen.get("max_tokens"), "length");
    assert.notEqual(seen.get("cancelled"), "stop");
  });

  it("reports the agent's turn usage and the turn's last usage_update in RUN_FINISHED", async () => {
    const chunks = await run(bed, bed.harness()("m"), "usage 100; turn-usage 10 20 5; echo hi; usage 250");
    const finished = ofType(chunks, "RUN_FINISHED").at(-1);
    assert.deepEqual(finished?.usage, {
      promptTokens: 10,
      completionTokens: 20,
      totalTokens: 35,
      completionTokensDetails: { reasoningTokens: 5 },
    });
    assert.deepEqual(finished?.result, {
      stopReason: "end_turn",
      usage: { inputTokens: 10, outputTokens: 20, thoughtTokens: 5, totalTokens: 35 },
      usageUpdate: { used: 250, size: 200_000, cost: { amount: 0.00025, currency: "USD" } },
    });
    const silent = ofType(await run(bed, bed.harness()("m"), "echo no usage"), "RUN_FINISHED").at(-1);
    assert.equal(silent?.usage, undefined);
    assert.deepEqual(silent?.result, { stopReason: "end_turn" });
  });

  it("returns structured output typed from await chat(), without the JSON as a text part", async () => {
    const Report = z.object({ name: z.string(), oneLiner: z.string() });
    const result = await chat({
      adapter: bed.harness()("m"),
      messages: [user('tool read repo; json {"name":"acp","oneLiner":"agents over stdio"}')],
      outputSchema: Report,
      middleware: [withSandbox(bed.sandbox)],
    });
    assert.deepEqual(result, { name: "acp", oneLiner: "agents over stdio" });
    const stream = chat({
      adapter: bed.harness()("m"),
      messages: [user('json {"name":"acp","oneLiner":"x"}')],
      outputSchema: Report,
      stream: true,
      middleware: [withSandbox(bed.sandbox)],
    });
    const chunks: StreamChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk as StreamChunk);
    assert.ok(!texts(chunks).includes('"oneLiner"'), "raw JSON is not streamed as text");
    assert.deepEqual((customs(chunks, "structured-output.complete")[0] as { object: unknown }).object, {
      name: "acp",
      oneLiner: "x",
    });
  });

  it("keeps the agent process warm across two turns of one thread (same pid)", async () => {
    const pids = join(bed.root, "pids.txt");
    const mock = bed.harness({ command: () => `echo $$ >> ${quote(pids)}; exec ${mockCommand()}` });
    const first = await run(bed, mock("m"), "echo one", { threadId: "warm-thread" });
    const second = await run(bed, mock("m"), "echo two", { threadId: "warm-thread" });
    assert.equal(texts(second), "two");
    const session = (chunks: StreamChunk[]): string =>
      (customs(chunks, "mock.session-id")[0] as { sessionId: string }).sessionId;
    assert.equal(session(first), session(second), "same ACP session");
    const lines = (await readFile(pids, "utf8")).trim().split("\n");
    assert.equal(lines.length, 1, "one agent process served both turns");
    await run(bed, mock("m"), "echo three", { threadId: "other-thread" });
    assert.equal(
      (await readFile(pids, "utf8")).trim().split("\n").length,
      2,
      "another thread gets its own process",
    );
  });
});
