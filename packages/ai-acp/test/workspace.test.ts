import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createSecrets, defineWorkspace, mcpSkill } from "@sandbox-agent/ai-sandbox";
import { mockCommand, proxiedMockCommand, run, testBed, texts, type TestBed } from "./helpers.js";

describe("workspace skills and secrets reach the agent", { timeout: 60_000 }, () => {
  let bed: TestBed;
  before(async () => {
    bed = await testBed(
      "ai-acp-workspace",
      defineWorkspace({
        secrets: createSecrets({ WS_SECRET: "s3cret" }),
        skills: [mcpSkill("ws-tools", { url: "http://127.0.0.1:9/mcp", bearer: "tok" })],
        instructions: "Be brief.",
      }),
    );
  });
  after(() => bed.close());

  it("injects secrets into the agent env and passes mcpSkills as ACP mcpServers", async () => {
    const log = join(bed.root, "ws.log");
    const chunks = await run(
      bed,
      bed.harness({ command: () => mockCommand("--stdin-log", log) })("m"),
      "env WS_SECRET",
    );
    assert.equal(texts(chunks), "WS_SECRET=s3cret");
    const sent = await readFile(log, "utf8");
    assert.match(sent, /"type":"http","name":"ws-tools","url":"http:\/\/127.0.0.1:9\/mcp"/);
    assert.match(sent, /"Bearer tok"/);
    const sandbox = await bed.sandbox.start();
    assert.match(Buffer.from((await sandbox.files.readFile("AGENTS.md")) ?? []).toString(), /Be brief\./);
  });

  it("drops HTTP mcpSkills for an agent without mcpCapabilities.http", async () => {
    const log = join(bed.root, "ws-nohttp.log");
    const noHttp = bed.harness({
      command: () => proxiedMockCommand({ mcpCapabilities: { http: false } }, "--stdin-log", log),
    });
    await run(bed, noHttp("m"), "echo x");
    assert.doesNotMatch(await readFile(log, "utf8"), /ws-tools/);
  });
});
