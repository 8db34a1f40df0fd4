import assert from "node:assert/strict";
import {
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { chat } from "@tanstack/ai";
import { tempDir } from "@sandbox-agent/testkit";
import {
  agentSkill,
  createSecrets,
  defineSandbox,
  defineWorkspace,
  fileSkill,
  gitRepository,
  gitSkill,
  localDirectory,
  localProcessSandbox,
  mcpSkill,
  placeSkills,
  withSandbox,
  type SandboxDefinition,
} from "../src/index.js";
import { isLocalPath } from "../src/workspace.js";
import { makeRepo as makeRepoIn, runIn, ShellAdapter } from "./helpers.js";

const cleanup: Array<() => unknown> = [];
after(async () => {
  for (const step of cleanup.reverse()) await step();
});
function sandbox(options: Parameters<typeof defineSandbox>[0]): SandboxDefinition {
  const definition = defineSandbox(options);
  cleanup.push(() => definition.dispose());
  return definition;
}
function scratch(): string {
  const dir = tempDir("ai-sandbox-test-");
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
const makeRepo = (): string => makeRepoIn(scratch());
const text = (data: Uint8Array | undefined): string | undefined =>
  data === undefined ? undefined : Buffer.from(data).toString();
const chatOnce = (definition: SandboxDefinition, command: string): Promise<string> =>
  chat({
    adapter: new ShellAdapter(command),
    messages: [{ role: "user", content: "go" }],
    middleware: [withSandbox(definition)],
    stream: false,
  });

describe("git sources", () => {
  it("tells the paths git reads locally from URLs, as git does", () => {
    const local = ["/srv/repos/app", "./app", "app", "../a:b", "file:///srv/app.git", "FILE:///x"];
    const remote = [
      "https://github.com/o/a.git",
      "git@github.com:o/a.git",
      "ssh://host/a",
      "host:a",
      "git://h/a",
    ];
    assert.deepEqual(
      local.filter((url) => !isLocalPath(url)),
      [],
    );
    assert.deepEqual(remote.filter(isLocalPath), []);
  });
});

describe("workspace bootstrap", { timeout: 30_000 }, () => {
  it("copies a local directory source without touching the original", async () => {
    const source = scratch();
    mkdirSync(join(source, "lib"));
    writeFileSync(join(source, "lib/a.txt"), "A");
    const instance = await sandbox({
      id: "local-source",
      provider: localProcessSandbox(),
      workspace: defineWorkspace({ source: localDirectory(source) }),
    }).start();
    assert.equal(text(await instance.files.readFile("lib/a.txt")), "A");
    await instance.files.writeFile("lib/a.txt", "changed");
    assert.equal(readFileSync(join(source, "lib/a.txt"), "utf8"), "A");
  });

  it("clones a git repository by path, at HEAD or at a ref, leaving no clone temp dirs", async () => {
    const clones = (): string[] => readdirSync(tmpdir()).filter((name) => name.startsWith("sandbox-clone-"));
    const before = clones();
    const repo = makeRepo();
    const head = await sandbox({
      id: "git-head",
      provider: localProcessSandbox(),
      workspace: defineWorkspace({ source: gitRepository(repo) }),
    }).start();
    assert.equal(text(await head.files.readFile("README.md")), "two\n");
    assert.equal((await runIn(head, "git log --format=%s")).stdout, "v2\nv1\n");
    const tagged = await sandbox({
      id: "git-ref",
      provider: localProcessSandbox(),
      workspace: defineWorkspace({ source: gitRepository(`file://${repo}`, { ref: "v1" }) }),
    }).start();
    assert.equal(text(await tagged.files.readFile("README.md")), "one\n");
    assert.equal(await tagged.files.readFile("src/app.ts"), undefined);
    assert.deepEqual(clones(), before);
  });

  it("reports a failing clone and a missing source directory clearly", async () => {
    const missing = join(scratch(), "nope");
    await assert.rejects(
      sandbox({
        id: "bad-git",
        provider: localProcessSandbox(),
        workspace: defineWorkspace({ source: gitRepository(missing) }),
      }).start(),
      /bootstrap failed: git clone of .*nope failed/,
    );
    await assert.rejects(
      sandbox({
        id: "bad-dir",
        provider: localProcessSandbox(),
        workspace: defineWorkspace({ source: localDirectory(missing) }),
      }).start(),
      /not a directory/,
    );
  });

  it("runs setup once across chat() calls that share the sandbox definition", async () => {
    const definition = sandbox({
      id: "setup-once",
      provider: localProcessSandbox(),
      workspace: defineWorkspace({ setup: ["echo run >> setup.log", "test -f setup.log"] }),
    });
    const first = await chatOnce(definition, "wc -l < setup.log && pwd");
    const second = await chatOnce(definition, "wc -l < setup.log && pwd");
    assert.equal(first.split("\n")[0]?.trim(), "1");
    assert.equal(second, first, "same workdir, setup not re-run");
  });

  it("a failing setup command fails start() with its exit code and stderr", async () => {
    const definition = sandbox({
      id: "setup-fails",
      provider: localProcessSandbox(),
      workspace: defineWorkspace({ setup: "echo broken-tool >&2; exit 7" }),
    });
    await assert.rejects(
      definition.start(),
      /setup "echo broken-tool >&2; exit 7" failed \(exit code 7\): broken-tool/,
    );
  });

  it("setup may be a function receiving the instance", async () => {
    const instance = await sandbox({
      id: "setup-fn",
      provider: localProcessSandbox(),
      workspace: defineWorkspace({ setup: (s) => s.files.writeFile("made-by-setup", s.id) }),
    }).start();
    assert.equal(text(await instance.files.readFile("made-by-setup")), "setup-fn");
  });

  it("writes instructions into AGENTS.md, appending to one from the source", async () => {
    const source = scratch();
    writeFileSync(join(source, "AGENTS.md"), "# Repo rules\n");
    const instance = await sandbox({
      id: "instructions",
      provider: localProcessSandbox(),
      workspace: defineWorkspace({
        source: localDirectory(source),
        instructions: "Always run the tests.",
        instructionLinks: ["CLAUDE.md"],
      }),
    }).start();
    assert.equal(text(await instance.files.readFile("AGENTS.md")), "# Repo rules\n\nAlways run the tests.\n");
    assert.equal(readlinkSync(join(instance.workdir, "CLAUDE.md")), join(instance.workdir, "AGENTS.md"));
  });

  it("places skills per kind: file at the root, git linked into skillsDir, mcp resolved, agent warned", async () => {
    const skillRepo = makeRepo();
    const secrets = createSecrets({ MCP_TOKEN: "mcp-secret" });
    const instance = await sandbox({
      id: "skills",
      provider: localProcessSandbox(),
      workspace: defineWorkspace({
        secrets,
        skills: [
          fileSkill({ path: ".pi/notes.md", content: "note" }),
          gitSkill({ repo: skillRepo, name: "review" }),
          mcpSkill("docs", { url: "http://127.0.0.1:9/mcp", bearer: secrets.ref("MCP_TOKEN") }),
          mcpSkill("local", {
            command: "node",
            args: ["server.js"],
            env: { TOKEN: secrets.ref("MCP_TOKEN") },
          }),
          agentSkill("frontend-design"),
        ],
      }),
    }).start();
    assert.equal(text(await instance.files.readFile(".pi/notes.md")), "note");
    assert.deepEqual(instance.workspace.mcpServers, [
      {
        type: "http",
        name: "docs",
        url: "http://127.0.0.1:9/mcp",
        headers: [{ name: "Authorization", value: "Bearer mcp-secret" }],
      },
      { name: "local", command: "node", args: ["server.js"], env: [{ name: "TOKEN", value: "mcp-secret" }] },
    ]);
    assert.equal(instance.workspace.gitSkills[0]?.name, "review");
    assert.equal(
      await instance.files.readFile(".pi/skills/review/README.md"),
      undefined,
      "not linked before placeSkills",
    );

    const warnings = await placeSkills(instance, { skillsDir: ".pi/skills" });
    assert.deepEqual(warnings, [instance.workspace.warnings[0]]);
    assert.match(warnings[0] ?? "", /agentSkill\("frontend-design"\) skipped/);
    assert.ok(lstatSync(join(instance.workdir, ".pi/skills/review")).isSymbolicLink());
    assert.equal(text(await instance.files.readFile(".pi/skills/review/README.md")), "two\n");

    const unplaced = await placeSkills(instance, {});
    assert.match(unplaced.at(-1) ?? "", /gitSkills not linked \(no skillsDir declared\): review/);
  });

  it("secrets reach processes but are never written to disk nor printed", async () => {
    const value = "sk-never-on-disk-4711";
    const secrets = createSecrets({ PI_API_KEY: value });
    const definition = sandbox({
      id: "secrets",
      provider: localProcessSandbox(),
      workspace: defineWorkspace({
        secrets,
        instructions: "Use the key.",
        skills: [fileSkill({ path: "skill.md", content: "s" })],
        setup: ["echo setup-ran > marker"],
      }),
    });
    const output = await chatOnce(
      definition,
      'test "$PI_API_KEY" = sk-never-on-disk-4711 && echo key-present',
    );
    assert.equal(output, "key-present\n");
    const instance = await definition.start();
    const root = join(instance.workdir, "..");
    const grep = await runIn(instance, `grep -rl -- ${value} ${root} || true`);
    assert.equal(grep.stdout, "");
    assert.equal(String(secrets), "Secrets(PI_API_KEY=[redacted])");
    assert.equal(JSON.stringify({ secrets }), '{"secrets":{"PI_API_KEY":"[redacted]"}}');
    assert.doesNotMatch(JSON.stringify(defineWorkspace({ secrets })), new RegExp(value));
  });
});
