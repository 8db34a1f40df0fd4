import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { withSandbox } from "@sandbox-agent/ai-sandbox";
import { chat, StreamProcessor, type StreamChunk, type UIMessage } from "@tanstack/ai";
import type { PermissionRequestInfo } from "../src/index.js";
import { mockCommand, run, testBed, texts, type TestBed } from "./helpers.js";

describe("permissions", { timeout: 300_000 }, () => {
  let bed: TestBed;
  before(async () => {
    bed = await testBed("ai-acp-permissions");
  });
  after(() => bed.close());

  it("headless: bypassPermissions (default) allows once, default mode rejects", async () => {
    assert.match(texts(await run(bed, bed.harness()("m"), "permission risky")), /selected allow_once/);
    const strict = bed.harness({ permissionMode: "default" });
    assert.match(texts(await run(bed, strict("m"), "permission risky")), /selected reject_once/);
  });

  it("acceptEdits approves by tool kind, never by title", async () => {
    const mock = bed.harness({ permissionMode: "acceptEdits" });
    const write = texts(await run(bed, mock("m"), "write notes/a.txt hello"));
    assert.match(write, /wrote notes\/a.txt/);
    const sandbox = await bed.sandbox.start();
    assert.equal(Buffer.from((await sandbox.files.readFile("notes/a.txt")) ?? []).toString(), "hello");
    // An execute-kind request whose title claims to be an edit stays rejected.
    assert.match(
      texts(await run(bed, mock("m"), "permission edit file notes/a.txt")),
      /selected reject_once/,
    );
  });

  it("onPermissionRequest wins over the mode and sees the tool kind", async () => {
    const seen: PermissionRequestInfo[] = [];
    const mock = bed.harness({
      permissionMode: "bypassPermissions",
      onPermissionRequest: (request) => {
        seen.push(request);
        return { outcome: "selected", optionId: "reject_always" };
      },
    });
    assert.match(texts(await run(bed, mock("m"), "permission risky")), /selected reject_always/);
    assert.equal(seen[0]?.knownKind, "execute");
    assert.equal(seen[0]?.options.length, 4);
  });

  it("interactive: the turn pauses until the client answers, then continues with the answer", async () => {
    const log = join(bed.root, "interactive.log");
    const mock = bed.harness({
      permissions: "interactive",
      permissionMode: "default",
      command: () => mockCommand("--stdin-log", log),
    });
    const processor = new StreamProcessor();
    const threadId = "interactive-thread";
    processor.addUserMessage("echo before; permission deploy; echo after");
    const first: StreamChunk[] = [];
    for await (const chunk of chat({
      adapter: mock("m"),
      messages: processor.getMessages(),
      threadId,
      middleware: [withSandbox(bed.sandbox)],
    })) {
      first.push(chunk);
      processor.processChunk(chunk);
    }
    const finished = first.filter((c) => c.type === "RUN_FINISHED").at(-1) as unknown as {
      outcome: { type: string; interrupts: Array<{ id: string; toolCallId: string }> };
    };
    assert.equal(finished.outcome.type, "interrupt");
    assert.equal(texts(first), "before");

    const approvalId = finished.outcome.interrupts[0]?.id ?? "";
    const part = processor
      .getMessages()
      .flatMap((m: UIMessage) => m.parts)
      .find((p) => p.type === "tool-call" && p.id === finished.outcome.interrupts[0]?.toolCallId);
    assert.equal(part?.type === "tool-call" ? part.state : undefined, "approval-requested");
    processor.addToolApprovalResponse(approvalId, true);
    const second: StreamChunk[] = [];
    for await (const chunk of chat({
      adapter: mock("m"),
      messages: processor.getMessages(),
      threadId,
      middleware: [withSandbox(bed.sandbox)],
    })) {
      second.push(chunk);
    }
    assert.match(texts(second), /permission: selected allow_once/);
    assert.match(texts(second), /after/);
    assert.equal(second.filter((c) => c.type === "RUN_FINISHED").length, 1);
    // The request was answered once, with the client's approval: nothing answered it during the pause.
    const outcomes = (await readFile(log, "utf8")).match(/"outcome":\{[^}]*\}/g);
    assert.deepEqual(outcomes, ['"outcome":{"outcome":"selected","optionId":"allow_once"}']);
  });
});
