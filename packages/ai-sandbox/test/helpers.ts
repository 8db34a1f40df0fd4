import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  EventType,
  type DefaultMessageMetadataByModality,
  type StreamChunk,
  type TextOptions,
} from "@tanstack/ai";
import { BaseTextAdapter, type StructuredOutputResult } from "@tanstack/ai/adapters";
import { readText } from "@sandbox-agent/testkit";
import {
  getSandbox,
  reportFileChanges,
  SandboxCapability,
  snapshotFiles,
  type SandboxInstance,
} from "../src/index.js";

export { readText };

/** Runs git in `cwd` with a fixed identity and default branch. */
export function git(cwd: string, ...args: string[]): string {
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: "t",
    GIT_AUTHOR_EMAIL: "t@t",
    GIT_COMMITTER_NAME: "t",
    GIT_COMMITTER_EMAIL: "t@t",
  };
  return execFileSync("git", ["-c", "init.defaultBranch=main", ...args], { cwd, env, encoding: "utf8" });
}

/** A repository in `dir` with two commits: v1 (README "one") and HEAD (README "two", src/app.ts). */
export function makeRepo(dir: string): string {
  git(dir, "init", "--quiet");
  writeFileSync(join(dir, "README.md"), "one\n");
  git(dir, "add", ".");
  git(dir, "commit", "--quiet", "-m", "v1");
  git(dir, "tag", "v1");
  mkdirSync(join(dir, "src"));
  writeFileSync(join(dir, "README.md"), "two\n");
  writeFileSync(join(dir, "src/app.ts"), "export {};\n");
  git(dir, "add", ".");
  git(dir, "commit", "--quiet", "-m", "v2");
  return dir;
}

/** Runs `command` in the sandbox with stdin closed; resolves its stdout and exit code. */
export async function runIn(
  sandbox: Pick<SandboxInstance, "spawn">,
  command: string,
  env?: Record<string, string>,
): Promise<{ stdout: string; code: number | null }> {
  const proc = await sandbox.spawn(command, env === undefined ? {} : { env });
  await proc.stdin.close();
  const [stdout, exit] = await Promise.all([readText(proc.stdout), proc.exited]);
  return { stdout, code: exit.code };
}

/**
 * A minimal harness adapter: it requires the sandbox capability and answers each turn with
 * the output of `command` run in the provided sandbox. Lets the tests drive `withSandbox`
 * through the real `chat()` engine.
 */
export class ShellAdapter extends BaseTextAdapter<
  "shell",
  Record<string, never>,
  readonly ["text"],
  DefaultMessageMetadataByModality
> {
  readonly name = "shell";
  override readonly requires = [SandboxCapability] as const;

  constructor(
    private readonly command: string,
    private readonly options: { reportChanges?: boolean } = {},
  ) {
    super(undefined, "shell");
  }

  async *chatStream(options: TextOptions<Record<string, never>>): AsyncIterable<StreamChunk> {
    if (options.capabilities === undefined) throw new Error("no capabilities context");
    const sandbox = getSandbox(options.capabilities);
    const before = this.options.reportChanges ? await snapshotFiles(sandbox) : undefined;
    const { stdout } = await runIn(sandbox, this.command);
    if (before !== undefined) {
      reportFileChanges(options.capabilities, sandbox.workdir, before, await snapshotFiles(sandbox), {
        emitDiffs: true,
      });
    }
    const base = { threadId: options.threadId ?? "t", runId: options.runId ?? "r", timestamp: Date.now() };
    const messageId = `m-${Date.now()}`;
    yield { type: EventType.RUN_STARTED, ...base } as StreamChunk;
    yield {
      type: EventType.TEXT_MESSAGE_START,
      messageId,
      role: "assistant",
      timestamp: Date.now(),
    } as StreamChunk;
    yield {
      type: EventType.TEXT_MESSAGE_CONTENT,
      messageId,
      delta: stdout,
      timestamp: Date.now(),
    } as StreamChunk;
    yield { type: EventType.TEXT_MESSAGE_END, messageId, timestamp: Date.now() } as StreamChunk;
    yield { type: EventType.RUN_FINISHED, ...base, finishReason: "stop" } as StreamChunk;
  }

  structuredOutput(): Promise<StructuredOutputResult<unknown>> {
    return Promise.reject(new Error("not supported"));
  }
}

interface HostProcess {
  pgid: number;
  pid: number;
  args: string;
}

/** Every running process of this machine as `ps` sees it (zombies excluded). */
async function hostProcesses(): Promise<HostProcess[]> {
  const { execFile } = await import("node:child_process");
  const out = await new Promise<string>((resolve) =>
    execFile("ps", ["-e", "-o", "pgid=,stat=,pid=,args="], (_error, stdout) => resolve(stdout)),
  );
  return out
    .split("\n")
    .map((line) => line.trim().split(/\s+/))
    .filter(([group, stat]) => group !== "" && !stat?.startsWith("Z"))
    .map((cols) => ({ pgid: Number(cols[0]), pid: Number(cols[2]), args: cols.slice(3).join(" ") }));
}

/** Lists the processes of group `pgid` that are still running (zombies excluded). */
export async function groupSurvivors(pgid: number): Promise<string[]> {
  return (await hostProcesses()).filter((p) => p.pgid === pgid).map((p) => p.args);
}

/** Host pids of the running processes whose command line is exactly `args`. */
export async function pidsRunning(args: string): Promise<number[]> {
  return (await hostProcesses()).filter((p) => p.args === args).map((p) => p.pid);
}
