import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { lstat, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createSecrets, defineWorkspace, gitSkill, mcpSkill } from "@sandbox-agent/ai-sandbox";
import { tempDir } from "@sandbox-agent/testkit";
import { customs, mockCommand, proxiedMockCommand, run, testBed, texts, type TestBed } from "./helpers.js";

/** A one-commit git repository holding a SKILL.md. */
async function skillRepository(): Promise<string> {
  const dir = tempDir("ai-acp-skill-");
  await writeFile(join(dir, "SKILL.md"), "# review\nRead the diff twice.\n");
  const git = (...args: string[]): void =>
    void execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd: dir });
  git("init", "--quiet");
  git("add", ".");
  git("commit", "--quiet", "-m", "skill");
  return dir;
}

describe("workspace skills and secrets reach the agent", { timeout: 300_000 }, () => {
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

describe("git skills are placed where the harness looks for them", { timeout: 300_000 }, () => {
  let bed: TestBed;
  let repo: string;
  before(async () => {
    repo = await skillRepository();
    bed = await testBed("ai-acp-skills", defineWorkspace({ skills: [gitSkill({ repo, name: "review" })] }));
  });
  after(async () => {
    await bed.close();
    await rm(repo, { recursive: true, force: true });
  });

  it("without skillsDir a warning says the skill was not linked", async () => {
    const chunks = await run(bed, bed.harness()("m"), "echo x");
    const warnings = customs(chunks, "mock.warning") as Array<{ message: string }>;
    assert.match(
      warnings.map((w) => w.message).join("\n"),
      /gitSkills not linked \(no skillsDir declared\): review/,
    );
    const workdir = (await bed.sandbox.start()).workdir;
    await assert.rejects(lstat(join(workdir, ".pi/skills/review")), "nothing linked");
  });

  it("with skillsDir the skill is linked into it, relative to the workspace, before the agent starts", async () => {
    // The harness command reads the skill before it starts the agent.
    const mock = bed.harness({
      skillsDir: ".pi/skills",
      command: () => `cat .pi/skills/review/SKILL.md > seen-skill.txt; exec ${mockCommand()}`,
    });
    const chunks = await run(bed, mock("m"), "echo x");
    assert.deepEqual(customs(chunks, "mock.warning"), []);
    const workdir = (await bed.sandbox.start()).workdir;
    assert.equal(await readFile(join(workdir, "seen-skill.txt"), "utf8"), "# review\nRead the diff twice.\n");
  });
});
