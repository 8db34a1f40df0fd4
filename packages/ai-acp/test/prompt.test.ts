import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { BuildPromptContext } from "../src/index.js";
import { customs, mockCommand, run, testBed, texts, type TestBed } from "./helpers.js";

/** The `params` of every `method` request the agent read on stdin (its `--stdin-log`). */
async function sentRequests(log: string, method: string): Promise<Array<Record<string, unknown>>> {
  return (await readFile(log, "utf8"))
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as { method?: string; params?: Record<string, unknown> })
    .filter((message) => message.method === method)
    .map((message) => message.params ?? {});
}

/** The text blocks of each `session/prompt` the agent received. */
async function promptsSent(log: string): Promise<string[]> {
  return (await sentRequests(log, "session/prompt")).map((params) =>
    (params.prompt as Array<{ type: string; text?: string }>)
      .filter((block) => block.type === "text")
      .map((block) => block.text)
      .join("\n"),
  );
}

const history = [
  { role: "user" as const, content: "echo first question" },
  { role: "assistant" as const, content: "first answer" },
  { role: "user" as const, content: "echo second question" },
];

describe("what the agent is sent: prompt, history and working directory", { timeout: 300_000 }, () => {
  let bed: TestBed;
  before(async () => {
    bed = await testBed("ai-acp-prompt");
  });
  after(() => bed.close());

  it("a fresh session gets the system prompts and the conversation, then the last user message", async () => {
    const log = join(bed.root, "fresh.log");
    const mock = bed.harness({ command: () => mockCommand("--stdin-log", log) });
    await run(bed, mock("m"), "", { messages: history, systemPrompts: ["Answer briefly."] });
    assert.deepEqual(await promptsSent(log), [
      "Answer briefly.\n\nConversation so far:\nUser: echo first question\nAssistant: first answer\n\necho second question",
    ]);
  });

  it("a resumed session gets only the last user message", async () => {
    const state = join(bed.root, "resume-state");
    const env = { MOCK_AGENT_STATE_DIR: state };
    const first = await run(bed, bed.harness({ env })("m"), "echo first question");
    const sessionId = (customs(first, "mock.session-id")[0] as { sessionId: string }).sessionId;
    const log = join(bed.root, "resume.log");
    const resuming = bed.harness({ env, command: () => mockCommand("--stdin-log", log) });
    const chunks = await run(bed, resuming("m"), "", {
      messages: history,
      systemPrompts: ["Answer briefly."],
      modelOptions: { sessionId },
    });
    assert.deepEqual(customs(chunks, "mock.warning"), [], "the session was resumed");
    assert.equal((await sentRequests(log, "session/load"))[0]?.sessionId, sessionId);
    assert.deepEqual(await promptsSent(log), ["echo second question"]);
    assert.equal(texts(chunks), "second question");
  });

  it("buildPrompt replaces the mapping: it sees the turn and its string or blocks are sent as they are", async () => {
    const seen: BuildPromptContext[] = [];
    const log = join(bed.root, "build.log");
    const mock = bed.harness({
      command: () => mockCommand("--stdin-log", log),
      buildPrompt: (ctx) => {
        seen.push(ctx);
        return seen.length === 1
          ? `echo built from ${ctx.messages.length} messages`
          : [
              { type: "text", text: "echo as" },
              { type: "text", text: "echo blocks" },
            ];
      },
    });
    const thread = { threadId: "build-prompt-thread", systemPrompts: ["Answer briefly."] };
    const first = await run(bed, mock("m"), "", { messages: history, ...thread });
    assert.equal(texts(first), "built from 3 messages");
    assert.equal(seen[0]?.resumed, false);
    assert.deepEqual(seen[0]?.systemPrompts, ["Answer briefly."]);
    assert.deepEqual(seen[0]?.messages, history);
    assert.equal(seen[0]?.outputSchema, undefined);
    const second = await run(bed, mock("m"), "", {
      messages: [...history, { role: "user", content: "again" }],
      ...thread,
    });
    assert.equal(seen[1]?.resumed, true, "the warm session already holds the conversation");
    assert.equal(texts(second), "asblocks");
    assert.deepEqual(await promptsSent(log), ["echo built from 3 messages", "echo as\necho blocks"]);
  });

  it("runs the agent in the configured cwd, and modelOptions.cwd overrides it per call", async () => {
    const sandbox = await bed.sandbox.start();
    const configured = join(sandbox.workdir, "configured");
    const perCall = join(sandbox.workdir, "per-call");
    await Promise.all([mkdir(configured), mkdir(perCall)]);
    const mock = bed.harness({ cwd: configured });
    assert.match(texts(await run(bed, mock("m"), "write here.txt one")), /wrote here.txt/);
    assert.equal(await readFile(join(configured, "here.txt"), "utf8"), "one");
    await run(bed, mock("m"), "write there.txt two", { modelOptions: { cwd: perCall } });
    assert.equal(await readFile(join(perCall, "there.txt"), "utf8"), "two");
    assert.ok(!existsSync(join(sandbox.workdir, "here.txt")), "not in the sandbox workdir");
    assert.ok(!existsSync(join(configured, "there.txt")), "the per-call cwd won");
  });
});
