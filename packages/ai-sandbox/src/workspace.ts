import { execFile } from "node:child_process";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { promisify } from "node:util";
import type { ProviderInstance } from "./provider.js";
import { revealSecrets, type Secrets } from "./secrets.js";
import { shellQuote } from "./shell.js";
import { resolveMcpSkill, type WorkspaceSkill } from "./skills.js";
import type {
  ProvisionedGitSkill,
  ProvisionedWorkspace,
  ResolvedMcpServer,
  SandboxInstance,
} from "./types.js";

const run = promisify(execFile);
const GIT_TIMEOUT_MS = 120_000;
const SETUP_TIMEOUT_MS = 10 * 60_000;

export type WorkspaceSource =
  | { readonly kind: "local-directory"; readonly path: string }
  | { readonly kind: "git"; readonly url: string; readonly ref?: string };

/** Copy a directory of this machine into the workspace. */
export function localDirectory(path: string): WorkspaceSource {
  return { kind: "local-directory", path: resolve(path) };
}

/**
 * Clone a repository (path or URL, anything `git clone` accepts). A URL is cloned inside the
 * sandbox with its `git` and network. A path (or `file://` URL) is cloned inside too, where paths
 * are the sandbox's own (a container: mount the repository), except in a local sandbox isolated with
 * bubblewrap, where it names a repository of this machine that commands inside cannot see: it is
 * cloned with this machine's `git` and copied in. Providers that cannot run commands clone
 * everything with this machine's `git`.
 */
export function gitRepository(url: string, options: { ref?: string } = {}): WorkspaceSource {
  return { kind: "git", url, ...(options.ref !== undefined ? { ref: options.ref } : {}) };
}

/** `owner/name` on GitHub, cloned over HTTPS. */
export function githubRepo(options: { repo: string; ref?: string }): WorkspaceSource {
  if (!/^[\w.-]+\/[\w.-]+$/.test(options.repo))
    throw new TypeError(`githubRepo: expected "owner/name", got "${options.repo}"`);
  return gitRepository(
    `https://github.com/${options.repo}.git`,
    options.ref !== undefined ? { ref: options.ref } : {},
  );
}

export type WorkspaceSetup =
  string | readonly string[] | ((sandbox: SandboxInstance) => void | Promise<void>);

export interface WorkspaceOptions {
  source?: WorkspaceSource;
  /** Run once per sandbox instance, after source, skills and instructions are in place. */
  setup?: WorkspaceSetup;
  secrets?: Secrets;
  /** Plain (non-secret) variables for agent and setup processes. */
  env?: Record<string, string>;
  skills?: readonly WorkspaceSkill[];
  /** Written to `AGENTS.md` at the workspace root (appended when the source already has one). */
  instructions?: string;
  /** Extra names linked to `AGENTS.md` for harnesses that read their own file. Default none. */
  instructionLinks?: readonly string[];
}

export interface Workspace extends Readonly<WorkspaceOptions> {
  readonly kind: "workspace";
}

export function defineWorkspace(options: WorkspaceOptions): Workspace {
  for (const name of Object.keys(options.env ?? {})) {
    if (options.secrets?.names.includes(name))
      throw new TypeError(`defineWorkspace: "${name}" is both env and a secret`);
  }
  return Object.freeze({ kind: "workspace", ...options });
}

/** @internal Env the agent processes get from the workspace: declared env + secrets. */
export function workspaceEnv(workspace: Workspace | undefined): Record<string, string> {
  return { ...workspace?.env, ...revealSecrets(workspace?.secrets) };
}

const EMPTY_WORKSPACE: ProvisionedWorkspace = Object.freeze({
  mcpServers: [],
  gitSkills: [],
  warnings: [],
});

/** @internal Materialize source, skills, instructions, then run setup. */
export async function bootstrapWorkspace(
  instance: ProviderInstance,
  workspace: Workspace | undefined,
  asInstance: (provisioned: ProvisionedWorkspace) => SandboxInstance,
): Promise<SandboxInstance> {
  if (workspace === undefined) return asInstance(EMPTY_WORKSPACE);
  const materialize = instance.bootstrapped !== true;
  if (materialize && workspace.source !== undefined)
    await importSource(instance, workspace.source, instance.workdir);
  const provisioned = await placeWorkspaceSkills(instance, workspace, materialize);
  if (!materialize) return asInstance(provisioned);
  if (workspace.instructions !== undefined) await writeInstructions(instance, workspace);
  const sandbox = asInstance(provisioned);
  if (workspace.setup !== undefined) await runSetup(sandbox, workspace.setup);
  return sandbox;
}

async function importSource(
  instance: ProviderInstance,
  source: WorkspaceSource,
  dest: string,
): Promise<void> {
  if (source.kind === "local-directory") {
    const info = await stat(source.path).catch(() => undefined);
    if (!info?.isDirectory()) throw new Error(`workspace source is not a directory: ${source.path}`);
    return instance.importDirectory(source.path, dest);
  }
  const onHost =
    instance.canSpawn === false || (instance.localPathsOnHost === true && isLocalPath(source.url));
  if (!onHost) return cloneInside(instance, source, dest);
  const checkout = await cloneOnHost(source.url, source.ref);
  try {
    await instance.importDirectory(checkout, dest);
  } finally {
    await rm(dirname(checkout), { recursive: true, force: true });
  }
}

/**
 * Whether git reads `url` as a local repository: a `file://` URL, or a path (no `scheme://`, and
 * not scp-like `host:path`, where a colon comes before any slash).
 */
export function isLocalPath(url: string): boolean {
  if (/^file:\/\//i.test(url)) return true;
  return !url.includes("://") && !/^[^/]*:/.test(url);
}

/** `git clone` then, for a ref, `git checkout`: as argv lists, run on the host or inside the sandbox. */
function cloneCommands(url: string, ref: string | undefined, dir: string): string[][] {
  const clone = ["git", "clone", "--quiet", ...(ref === undefined ? [] : ["--no-checkout"]), "--", url, dir];
  return ref === undefined ? [clone] : [clone, ["git", "-C", dir, "checkout", "--quiet", ref]];
}

function cloneFailed(source: { url: string; ref?: string }, why: string): Error {
  return new Error(
    `git clone of ${source.url}${source.ref === undefined ? "" : `@${source.ref}`} failed: ${why}`,
  );
}

/** Clones where the agent runs, with the sandbox's own git and network. */
async function cloneInside(
  instance: ProviderInstance,
  source: { url: string; ref?: string },
  dest: string,
): Promise<void> {
  const script = cloneCommands(source.url, source.ref, dest)
    .map((argv) => argv.map(shellQuote).join(" "))
    .join(" && ");
  try {
    await runCommand(instance, script, GIT_TIMEOUT_MS, { GIT_TERMINAL_PROMPT: "0" });
  } catch (error) {
    throw cloneFailed(source, (error as CommandError).output ?? (error as Error).message);
  }
}

/** Clones on the host (for providers that cannot run commands) and returns the checkout dir. */
async function cloneOnHost(url: string, ref: string | undefined): Promise<string> {
  const parent = await mkdtemp(join(tmpdir(), "sandbox-clone-"));
  const dir = join(parent, "repo");
  const options = { timeout: GIT_TIMEOUT_MS, env: { ...process.env, GIT_TERMINAL_PROMPT: "0" } };
  try {
    for (const [file, ...args] of cloneCommands(url, ref, dir)) await run(file as string, args, options);
    return dir;
  } catch (error) {
    await rm(parent, { recursive: true, force: true });
    const stderr = (error as { stderr?: string }).stderr?.trim();
    throw cloneFailed(ref === undefined ? { url } : { url, ref }, stderr || (error as Error).message);
  }
}

/** `materialize`: clone and write the skills; false when they are in place already (resume). */
async function placeWorkspaceSkills(
  instance: ProviderInstance,
  workspace: Workspace,
  materialize: boolean,
): Promise<ProvisionedWorkspace> {
  const mcpServers: ResolvedMcpServer[] = [];
  const gitSkills: ProvisionedGitSkill[] = [];
  const warnings: string[] = [];
  for (const skill of workspace.skills ?? []) {
    switch (skill.kind) {
      case "mcp":
        mcpServers.push(resolveMcpSkill(skill, workspace.secrets));
        break;
      case "git": {
        const path = `${instance.stateDir}/skills/${skill.name}`;
        if (materialize)
          await importSource(
            instance,
            gitRepository(skill.repo, skill.ref !== undefined ? { ref: skill.ref } : {}),
            path,
          );
        gitSkills.push({ name: skill.name, path });
        break;
      }
      case "file":
        if (materialize) await instance.files.writeFile(skill.path, skill.content);
        break;
      case "agent":
        warnings.push(
          `agentSkill("${skill.name}") skipped: ACP has no generic skill primitive; use gitSkill or mcpSkill`,
        );
        break;
    }
  }
  return Object.freeze({ mcpServers, gitSkills, warnings });
}

async function writeInstructions(instance: ProviderInstance, workspace: Workspace): Promise<void> {
  const existing = await instance.files.readFile("AGENTS.md");
  const text = workspace.instructions ?? "";
  const content =
    existing === undefined ? text : `${Buffer.from(existing).toString("utf8").trimEnd()}\n\n${text}`;
  await instance.files.writeFile("AGENTS.md", content.endsWith("\n") ? content : `${content}\n`);
  for (const name of workspace.instructionLinks ?? []) {
    if ((await instance.files.readFile(name)) !== undefined) continue;
    if (instance.files.symlink !== undefined)
      await instance.files.symlink(`${instance.workdir}/AGENTS.md`, name);
    else await instance.files.writeFile(name, content);
  }
}

async function runSetup(sandbox: SandboxInstance, setup: WorkspaceSetup): Promise<void> {
  if (typeof setup === "function") return setup(sandbox);
  for (const command of typeof setup === "string" ? [setup] : setup) await runSetupCommand(sandbox, command);
}

async function runSetupCommand(sandbox: SandboxInstance, command: string): Promise<void> {
  try {
    await runCommand(sandbox, command, SETUP_TIMEOUT_MS);
  } catch (error) {
    throw new Error(`workspace setup "${command}" ${(error as Error).message}`, { cause: error });
  }
}

/** A command that did not exit 0: `output` is the end of its stderr. */
interface CommandError extends Error {
  output?: string;
}

/** Runs `command` in the sandbox with stdin closed and stdout discarded; rejects unless it exits 0. */
async function runCommand(
  sandbox: Pick<SandboxInstance, "spawn">,
  command: string,
  timeoutMs: number,
  env?: Record<string, string>,
): Promise<void> {
  const proc = await sandbox.spawn(command, env === undefined ? {} : { env });
  await proc.stdin.close().catch(() => undefined);
  void proc.stdout.pipeTo(new WritableStream()).catch(() => undefined);
  const timer = setTimeout(() => void proc.kill(), timeoutMs);
  const { code, signal } = await proc.exited.finally(() => clearTimeout(timer));
  if (code !== 0) {
    await proc.kill();
    const why = signal !== null ? `signal ${signal}` : `exit code ${code}`;
    const output = proc.stderrTail().trim().slice(-2000);
    throw Object.assign(new Error(`failed (${why}): ${output}`), { output: output || why });
  }
}
