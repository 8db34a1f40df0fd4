import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { mockAgentBin, repoRoot, startServer, tempDir, type RunningServer } from "@sandbox-agent/testkit";
import { codeBlocks, mustRun, runCommand, type CodeBlock } from "../src/index.js";

/**
 * Every TypeScript and JavaScript block of the package READMEs, as a reader would paste it into a
 * file: TypeScript blocks are type-checked together (strict, lib ES2022 without the DOM, the
 * packages' published declarations), then every block not marked otherwise is run.
 *
 * The examples talk to `http://127.0.0.1:2468`, the address of `npm start`; here that address is
 * replaced by a server of this test, started as `npm start` starts it (the mock agent answers an
 * `initialize` that names no agent), with its agent `claude` played by the mock agent so the SDK's
 * quick start runs without a real CLI. The server's own README is left out: its examples are curl
 * command lines. The runnable example under examples/ runs as its README says, and the root
 * README's curl walkthrough runs in bash.
 */

const README_ADDRESS = "http://127.0.0.1:2468";
const BLOCK_TIMEOUT_MS = 60_000;

interface Example extends CodeBlock {
  readme: string;
  /** Source file name in the work directory. */
  file: string;
  /** What to run: the file itself (JavaScript) or its compiled output (TypeScript). */
  entry: string;
}

async function readmeExamples(): Promise<Example[]> {
  const root = JSON.parse(await readFile(path.join(repoRoot, "package.json"), "utf8")) as {
    workspaces: string[];
  };
  const examples: Example[] = [];
  for (const dir of root.workspaces.filter((w) => w !== "packages/server")) {
    const readme = path.join(dir, "README.md");
    if (!existsSync(path.join(repoRoot, readme))) continue;
    for (const block of codeBlocks(await readFile(path.join(repoRoot, readme), "utf8"))) {
      const base = `${path.basename(dir)}-README-L${block.line}`;
      const file = `${base}.${block.lang === "ts" ? "mts" : "mjs"}`;
      examples.push({ ...block, readme, file, entry: block.lang === "ts" ? `out/${base}.mjs` : file });
    }
  }
  return examples;
}

describe("README examples run as written", { timeout: 5 * 60_000 }, () => {
  const work = tempDir("sandbox-agent-readme-");
  const fsRoot = path.join(work, "fs-root");
  let server: RunningServer;
  let examples: Example[];

  before(async () => {
    await mkdir(fsRoot);
    server = await startServer({
      config: {
        defaultAgent: "mock",
        agents: { claude: { command: process.execPath, args: [mockAgentBin] } },
      },
      args: ["--workdir", fsRoot, "--fs-root", fsRoot],
    });
    examples = await readmeExamples();
    // The examples import the packages by name, as users do: resolve them from the repository.
    await symlink(path.join(repoRoot, "node_modules"), path.join(work, "node_modules"), "dir");
    await writeFile(path.join(work, "package.json"), JSON.stringify({ type: "module", private: true }));
    for (const example of examples) {
      await writeFile(path.join(work, example.file), example.code.replaceAll(README_ADDRESS, server.baseUrl));
    }
  });
  after(async () => {
    await server?.stop();
    await rm(work, { recursive: true, force: true });
  });

  it("finds the examples, and every marker says why", () => {
    assert.ok(examples.length >= 6, `found ${examples.length} examples`);
    for (const e of examples.filter((x) => x.mode !== "run")) assert.ok(e.reason, `${e.readme}:${e.line}`);
  });

  it("type-checks every TypeScript example without the DOM lib", async () => {
    const files = examples.filter((e) => e.lang === "ts" && e.mode !== "skip").map((e) => e.file);
    await writeFile(
      path.join(work, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          lib: ["ES2022"],
          types: ["node"],
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          skipLibCheck: true,
          outDir: "out",
        },
        files,
      }),
    );
    const tsc = createRequire(path.join(repoRoot, "package.json")).resolve("typescript/bin/tsc");
    const result = await runCommand(process.execPath, [tsc, "-p", "tsconfig.json"], {
      cwd: work,
      timeoutMs: 120_000,
    });
    // Errors name the example file; its name says which README line the block starts after.
    assert.equal(result.code, 0, `tsc failed:\n${result.stdout}${result.stderr}`);
  });

  it("runs every example not marked compile-only or skip", async (t) => {
    for (const example of examples.filter((e) => e.mode === "run")) {
      await t.test(`${example.readme}:${example.line}`, async () => {
        const result = await mustRun(process.execPath, [example.entry], {
          cwd: work,
          env: { SANDBOX_AGENT_DATA_DIR: path.join(work, "data") },
          timeoutMs: BLOCK_TIMEOUT_MS,
        });
        assert.doesNotMatch(result.stderr, /Error|Warning/, `stderr of ${example.file}:\n${result.stderr}`);
      });
    }
  });

  it("runs examples/chat-mock as its README says", async () => {
    const result = await mustRun(process.execPath, ["examples/chat-mock/main.mjs"], {
      cwd: repoRoot,
      timeoutMs: BLOCK_TIMEOUT_MS,
    });
    const types = result.stdout.split("\n").map((line) => line.split(/\s+/, 1)[0]);
    assert.equal(
      types.filter((t) => t === "RUN_FINISHED").length,
      2,
      "a tool round trip, then the end of the turn",
    );
    assert.match(result.stdout, /"stopReason":"end_turn"/);
    assert.match(result.stdout, /all done/);
  });

  it("runs the root README's curl walkthrough: initialize, session, prompt, DELETE", async () => {
    const readme = await readFile(path.join(repoRoot, "README.md"), "utf8");
    const script = /```bash\n(URL=[\s\S]*?)```/.exec(readme)?.[1];
    assert.ok(script, "the walkthrough block starts with URL=");
    const dir = tempDir("readme-curl-");
    const result = await mustRun(
      "bash",
      ["-euo", "pipefail", "-c", script.replaceAll(README_ADDRESS, server.baseUrl)],
      {
        cwd: dir,
        timeoutMs: BLOCK_TIMEOUT_MS,
      },
    );
    assert.match(result.stdout, /^connection [0-9a-f-]{36}$/m);
    assert.match(result.stdout, /^session \S+$/m);
    assert.match(result.stdout, /"text":"Hello from the mock agent"/);
    assert.match(result.stdout, /"stopReason":"end_turn"/);
    assert.match(result.stdout, /^DELETE: 202$/m);
    assert.ok(!existsSync(path.join(dir, "events.txt")), "the walkthrough cleans up after itself");
  });
});
