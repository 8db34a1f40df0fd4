import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { withSandbox } from "@sandbox-agent/ai-sandbox";
import { chat, StreamProcessor, toolDefinition, type StreamChunk } from "@tanstack/ai";
import { z } from "zod";
import { mockCommand, proxiedMockCommand, run, testBed, texts, type TestBed } from "./helpers.js";

const calls: Array<{ a: number; b: number }> = [];
const add = toolDefinition({
  name: "add",
  description: "Adds two numbers",
  inputSchema: z.object({ a: z.number(), b: z.number() }),
}).server(async (args) => {
  calls.push(args);
  return { sum: args.a + args.b };
});
const deploy = toolDefinition({
  name: "deploy",
  description: "Deploys (needs approval)",
  needsApproval: true,
  inputSchema: z.object({ target: z.string() }),
}).server(async ({ target }) => ({ deployed: target }));

describe("chat() tools bridged to the agent over MCP", { timeout: 300_000 }, () => {
  let bed: TestBed;
  before(async () => {
    bed = await testBed("ai-acp-mcp");
  });
  after(() => bed.close());

  it("runs a tool through the engine over MCP HTTP when the agent advertises it", async () => {
    const log = join(bed.root, "mcp-http.log");
    const mock = bed.harness({ command: () => mockCommand("--stdin-log", log) });
    const chunks = await run(bed, mock("m"), 'mcp add {"a":2,"b":3}', { tools: [add] });
    assert.match(texts(chunks), /mcp result: \{"sum":5\}/);
    assert.deepEqual(calls.at(-1), { a: 2, b: 3 });
    assert.match(await readFile(log, "utf8"), /"mcpServers":\[\{"type":"http"/);
  });

  it("applies the tool's input validation", async () => {
    const before = calls.length;
    const chunks = await run(bed, bed.harness()("m"), 'mcp add {"a":"two","b":3}', { tools: [add] });
    assert.match(texts(chunks), /mcp error: .*validation/i);
    assert.equal(calls.length, before, "the tool did not run");
  });

  it("falls back to a stdio MCP server when mcpCapabilities.http is not advertised", async () => {
    const log = join(bed.root, "mcp-stdio.log");
    const mock = bed.harness({
      command: () => proxiedMockCommand({ mcpCapabilities: { http: false } }, "--stdin-log", log),
    });
    const chunks = await run(bed, mock("m"), 'mcp add {"a":4,"b":5}', { tools: [add] });
    assert.match(texts(chunks), /mcp result: \{"sum":9\}/);
    const sent = await readFile(log, "utf8");
    assert.doesNotMatch(sent, /"type":"http"/);
    assert.match(sent, /"mcpServers":\[\{"name":"mock-chat-tools","command"/);
  });

  it("needsApproval pauses the agent's tool call until the client approves", async () => {
    const mock = bed.harness();
    const processor = new StreamProcessor();
    const threadId = "mcp-approval";
    processor.addUserMessage('mcp deploy {"target":"prod"}');
    const first: StreamChunk[] = [];
    for await (const chunk of chat({
      adapter: mock("m"),
      messages: processor.getMessages(),
      threadId,
      tools: [deploy],
      middleware: [withSandbox(bed.sandbox)],
    })) {
      first.push(chunk);
      processor.processChunk(chunk);
    }
    const finished = first.filter((c) => c.type === "RUN_FINISHED").at(-1) as unknown as {
      outcome: { type: string; interrupts: Array<{ id: string }> };
    };
    assert.equal(finished.outcome.type, "interrupt");
    assert.doesNotMatch(texts(first), /mcp result/);
    processor.addToolApprovalResponse(finished.outcome.interrupts[0]?.id ?? "", true);
    const second: StreamChunk[] = [];
    for await (const chunk of chat({
      adapter: mock("m"),
      messages: processor.getMessages(),
      threadId,
      tools: [deploy],
      middleware: [withSandbox(bed.sandbox)],
    })) {
      second.push(chunk);
    }
    assert.match(texts(second), /mcp result: \{"deployed":"prod"\}/);
  });
});
