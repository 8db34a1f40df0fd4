import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createSecrets, defineWorkspace } from "@sandbox-agent/ai-sandbox";
import { bwrapUnavailable, needService, repoRoot } from "@sandbox-agent/testkit";
import { customs, ofType, run, testBed, texts, type TestBed } from "./helpers.js";

describe(
  "chat() with the mock agent in a bwrap-isolated sandbox",
  { skip: needService("bwrap", bwrapUnavailable()), timeout: 60_000 },
  () => {
    let bed: TestBed;
    let outside: string;
    before(async () => {
      outside = await mkdtemp(join(tmpdir(), "ai-acp-outside-"));
      bed = await testBed(
        "ai-acp-bwrap",
        defineWorkspace({ setup: "echo $$ > setup-pid", secrets: createSecrets({ WS_SECRET: "s3cret" }) }),
        // The mock agent and its node_modules live in this repository, outside /usr.
        { isolate: "bwrap", readOnly: [repoRoot] },
      );
    });
    after(async () => {
      await bed.close();
      await rm(outside, { recursive: true, force: true });
    });

    it("runs a turn: the agent's file lands in the workspace, at the path the host sees", async () => {
      const sandbox = await bed.sandbox.start();
      const chunks = await run(
        bed,
        bed.harness({ emitDiff: true })("m"),
        "write notes/a.txt hello; env WS_SECRET; echo done",
      );
      assert.equal(ofType(chunks, "RUN_FINISHED").length, 1);
      assert.match(texts(chunks), /WS_SECRET=s3cret/);
      assert.match(texts(chunks), /done$/);
      assert.equal(Buffer.from((await sandbox.files.readFile("notes/a.txt")) ?? []).toString(), "hello");
      const [change] = customs(chunks, "file.changed") as Array<{ type: string; path: string }>;
      assert.equal(change?.type, "create");
      // Same path inside as outside: the agent's tool call names the file as the host knows it.
      const start = ofType(chunks, "TOOL_CALL_START")[0];
      assert.ok(start, "the write was streamed as a tool call");
      const args = ofType(chunks, "TOOL_CALL_ARGS")
        .map((c) => c["delta"])
        .join("");
      assert.ok(args.includes(join(sandbox.workdir, "notes/a.txt")), `tool call args: ${args}`);
      assert.equal(
        Buffer.from((await sandbox.files.readFile("setup-pid")) ?? []).toString(),
        "2\n",
        "setup ran in a PID namespace of its own",
      );
    });

    it("a write outside the sandbox never reaches the host", async () => {
      const target = join(outside, "escape.txt");
      const chunks = await run(bed, bed.harness()("m"), `write ${target} escaped; echo after`);
      assert.equal(ofType(chunks, "RUN_FINISHED").length, 1);
      assert.match(texts(chunks), /after$/);
      assert.equal(existsSync(target), false);
    });
  },
);
