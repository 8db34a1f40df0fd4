import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { chat, defineChatMiddleware, EventType, type StreamChunk } from "@tanstack/ai";
import { tempDir } from "@sandbox-agent/testkit";
import {
  defineSandbox,
  diffSnapshots,
  localProcessSandbox,
  snapshotFiles,
  withSandbox,
  type SandboxInstance,
} from "../src/index.js";
import { runIn, ShellAdapter } from "./helpers.js";

const definition = defineSandbox({ id: "diff", provider: localProcessSandbox() });
const scratchDirs: string[] = [];
after(async () => {
  await definition.dispose();
  for (const dir of scratchDirs) rmSync(dir, { recursive: true, force: true });
});

const lines = (n: number, tag = ""): string =>
  Array.from({ length: n }, (_, i) => `line ${i + 1}${tag}\n`).join("");

/** Applies `patch` with `git apply` to a copy of `before` and returns that copy. */
function applyWithGit(before: string, patch: string): string {
  const dir = tempDir("ai-sandbox-apply-");
  scratchDirs.push(dir);
  cpSync(before, dir, { recursive: true });
  execFileSync("git", ["apply", "--whitespace=nowarn", "-"], { cwd: dir, input: patch });
  return dir;
}

describe("snapshotFiles / diffSnapshots", { timeout: 30_000 }, () => {
  let instance: SandboxInstance;

  it("reports created, changed and deleted files as unified diffs that git apply accepts", async () => {
    instance = await definition.start();
    const big = lines(40);
    await instance.files.writeFile("keep.txt", "same\n");
    await instance.files.writeFile("big.txt", big);
    await instance.files.writeFile("gone.txt", "bye\n");
    await instance.files.writeFile("no-eol.txt", "a\nb");
    await instance.files.writeFile(".git/HEAD", "ignored\n");
    const beforeDir = tempDir("ai-sandbox-before-");
    scratchDirs.push(beforeDir);
    cpSync(instance.workdir, beforeDir, { recursive: true });
    const before = await snapshotFiles(instance);

    // Change lines 2 and 30 (two hunks), delete one file, add a nested one, fix a final newline.
    await runIn(instance, "sed -i -e 's/^line 2$/LINE TWO/' -e '30d' big.txt && rm gone.txt");
    await runIn(
      instance,
      "mkdir -p src/new && printf 'fresh\\nfile\\n' > src/new/made.ts && printf 'a\\nb\\n' > no-eol.txt",
    );
    await instance.files.writeFile(".git/HEAD", "changed but excluded\n");
    const diffs = diffSnapshots(before, await snapshotFiles(instance));

    assert.deepEqual(
      diffs.map(({ path, type }) => ({ path, type })),
      [
        { path: "big.txt", type: "change" },
        { path: "gone.txt", type: "delete" },
        { path: "no-eol.txt", type: "change" },
        { path: "src/new/made.ts", type: "create" },
      ],
    );
    const created = diffs.find((d) => d.type === "create")?.diff;
    assert.equal(
      created,
      "diff --git a/src/new/made.ts b/src/new/made.ts\nnew file mode 100644\n--- /dev/null\n+++ b/src/new/made.ts\n@@ -0,0 +1,2 @@\n+fresh\n+file\n",
    );
    assert.equal(diffs[0]?.diff.match(/^@@ /gm)?.length, 2, "distant changes give two hunks");
    assert.match(diffs[2]?.diff ?? "", /-b\n\\ No newline at end of file\n\+b\n/);

    const applied = applyWithGit(beforeDir, diffs.map((d) => d.diff).join(""));
    for (const path of ["big.txt", "no-eol.txt", "src/new/made.ts", "keep.txt"]) {
      assert.equal(
        readFileSync(join(applied, path), "utf8"),
        readFileSync(join(instance.workdir, path), "utf8"),
        path,
      );
    }
    assert.throws(() => readFileSync(join(applied, "gone.txt")));
  });

  it("agrees with git on a shuffled rewrite", async () => {
    const original = lines(60);
    const rewritten = lines(60)
      .split("\n")
      .map((line, i) => (i % 7 === 3 ? `${line} edited` : line))
      .filter((_, i) => i % 11 !== 5)
      .join("\n");
    await instance.files.writeFile("shuffle.txt", original);
    const beforeDir = tempDir("ai-sandbox-before-");
    scratchDirs.push(beforeDir);
    mkdirSync(beforeDir, { recursive: true });
    writeFileSync(join(beforeDir, "shuffle.txt"), original);
    const before = await snapshotFiles(instance);
    await instance.files.writeFile("shuffle.txt", rewritten);
    const [diff] = diffSnapshots(before, await snapshotFiles(instance));
    assert.equal(diff?.type, "change");
    const applied = applyWithGit(beforeDir, diff?.diff ?? "");
    assert.equal(readFileSync(join(applied, "shuffle.txt"), "utf8"), rewritten);
  });

  it("marks binary changes instead of printing bytes", async () => {
    const before = await snapshotFiles(instance);
    await instance.files.writeFile("blob.bin", new Uint8Array([0, 1, 2, 0]));
    const [diff] = diffSnapshots(before, await snapshotFiles(instance));
    assert.equal(diff?.path, "blob.bin");
    assert.match(diff?.diff ?? "", /Binary files \/dev\/null and b\/blob.bin differ/);
  });
});

describe("reportFileChanges through chat()", { timeout: 30_000 }, () => {
  it("streams sandbox.file and sandbox.file.diff events and runs middleware sandbox hooks", async () => {
    const seen: Array<{ type: string; path: string; diff: string }> = [];
    const observer = defineChatMiddleware({
      name: "observer",
      sandbox: {
        onFile: async (_ctx, event) =>
          void seen.push({ type: event.type, path: event.path, diff: await event.diff() }),
      },
    });
    await (await definition.start()).files.writeFile("keep.txt", "same\n");
    const chunks: StreamChunk[] = [];
    const stream = chat({
      adapter: new ShellAdapter("echo hi > created.txt && rm -f keep.txt", { reportChanges: true }),
      messages: [{ role: "user", content: "go" }],
      middleware: [withSandbox(definition), observer],
    });
    for await (const chunk of stream) chunks.push(chunk);
    const instance = await definition.start();
    const custom = chunks.filter(
      (c): c is StreamChunk & { name: string; value: { path: string; type?: string; diff?: string } } =>
        c.type === EventType.CUSTOM,
    );
    const files = custom.filter((c) => c.name === "sandbox.file").map((c) => [c.value.type, c.value.path]);
    assert.deepEqual(files, [
      ["create", `${instance.workdir}/created.txt`],
      ["delete", `${instance.workdir}/keep.txt`],
    ]);
    const diffs = custom.filter((c) => c.name === "sandbox.file.diff");
    assert.match(diffs[0]?.value.diff ?? "", /^\+hi$/m);
    assert.deepEqual(
      seen.map((e) => e.type),
      ["create", "delete"],
    );
    assert.match(seen[1]?.diff ?? "", /^-same$/m);
  });
});
