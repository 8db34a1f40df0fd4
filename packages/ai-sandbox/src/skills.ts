import { resolveSecretValue, type SecretRef, type Secrets } from "./secrets.js";
import type { ResolvedMcpServer, SandboxInstance } from "./types.js";

type MaybeSecret = string | SecretRef;

export type McpSkillConfig =
  | { type?: "stdio"; command: string; args?: string[]; env?: Record<string, MaybeSecret> }
  | {
      type?: "http" | "sse";
      url: string;
      headers?: Record<string, MaybeSecret>;
      /** Sent as `Authorization: Bearer <token>`. */
      bearer?: MaybeSecret;
    };

/** An MCP server handed to the agent natively through ACP `session/new` `mcpServers`. */
export interface McpSkill {
  readonly kind: "mcp";
  readonly name: string;
  readonly config: McpSkillConfig;
}

/** A skill repository cloned during bootstrap and linked into the harness' `skillsDir`. */
export interface GitSkill {
  readonly kind: "git";
  readonly name: string;
  /** Repository URL or path, anything `git clone` accepts. */
  readonly repo: string;
  readonly ref?: string;
}

/** A file written at `path` (relative to the workspace root) during bootstrap. */
export interface FileSkill {
  readonly kind: "file";
  readonly path: string;
  readonly content: string | Uint8Array;
}

/** A harness-native skill by name. ACP has no generic primitive for it: skipped with a warning. */
export interface AgentSkill {
  readonly kind: "agent";
  readonly name: string;
}

export type WorkspaceSkill = McpSkill | GitSkill | FileSkill | AgentSkill;

const SKILL_NAME = /^[A-Za-z0-9._-]+$/;

function checkName(kind: string, name: string): string {
  if (!SKILL_NAME.test(name) || name === "." || name === "..") {
    throw new TypeError(`${kind}: invalid name "${name}" (letters, digits, '.', '_', '-')`);
  }
  return name;
}

export function mcpSkill(name: string, config: McpSkillConfig): McpSkill {
  if (!("command" in config) && !("url" in config))
    throw new TypeError(`mcpSkill("${name}"): needs "command" or "url"`);
  return { kind: "mcp", name: checkName("mcpSkill", name), config };
}

/** `name` defaults to the repository's last path segment without `.git`. */
export function gitSkill(options: { repo: string; ref?: string; name?: string }): GitSkill {
  const derived =
    options.repo
      .replace(/\/+$/, "")
      .split(/[/:]/)
      .pop()
      ?.replace(/\.git$/, "") ?? "";
  return {
    kind: "git",
    name: checkName("gitSkill", options.name ?? derived),
    repo: options.repo,
    ...(options.ref !== undefined ? { ref: options.ref } : {}),
  };
}

export function fileSkill(options: { path: string; content: string | Uint8Array }): FileSkill {
  if (options.path.split(/[\\/]/).includes("..") || options.path.startsWith("/")) {
    throw new TypeError(`fileSkill: path must stay inside the workspace: "${options.path}"`);
  }
  return { kind: "file", path: options.path, content: options.content };
}

export function agentSkill(name: string): AgentSkill {
  return { kind: "agent", name };
}

function resolvePairs(
  record: Record<string, MaybeSecret> | undefined,
  secrets: Secrets | undefined,
): Array<{ name: string; value: string }> {
  return Object.entries(record ?? {}).map(([name, value]) => ({
    name,
    value: resolveSecretValue(value, secrets),
  }));
}

/** @internal Resolves secret refs/bearer into the ACP `McpServer` the agent receives. */
export function resolveMcpSkill(skill: McpSkill, secrets: Secrets | undefined): ResolvedMcpServer {
  const { config } = skill;
  if ("command" in config) {
    return {
      name: skill.name,
      command: config.command,
      args: config.args ?? [],
      env: resolvePairs(config.env, secrets),
    };
  }
  const headers = resolvePairs(config.headers, secrets);
  if (config.bearer !== undefined) {
    headers.push({ name: "Authorization", value: `Bearer ${resolveSecretValue(config.bearer, secrets)}` });
  }
  return { type: config.type ?? "http", name: skill.name, url: config.url, headers };
}

/**
 * Links the workspace's cloned git skills into the harness' `skillsDir` (relative to the
 * workdir). Returns warnings for skills that could not be placed; call once per session.
 */
export async function placeSkills(
  instance: SandboxInstance,
  options: { skillsDir?: string | undefined },
): Promise<string[]> {
  const warnings = [...instance.workspace.warnings];
  const { gitSkills } = instance.workspace;
  if (gitSkills.length === 0) return warnings;
  if (options.skillsDir === undefined) {
    warnings.push(`gitSkills not linked (no skillsDir declared): ${gitSkills.map((s) => s.name).join(", ")}`);
    return warnings;
  }
  for (const skill of gitSkills) {
    await linkOrCopy(instance, skill.path, `${options.skillsDir.replace(/\/+$/, "")}/${skill.name}`);
  }
  return warnings;
}

async function linkOrCopy(instance: SandboxInstance, target: string, linkPath: string): Promise<void> {
  const { files } = instance;
  if (files.symlink !== undefined) return files.symlink(target, linkPath);
  // Providers without symlinks (remote file APIs) get a copy of the clone.
  for (const entry of await files.list(target)) {
    if (entry.type !== "file") continue;
    const data = await files.readFile(`${target}/${entry.path}`);
    if (data !== undefined) await files.writeFile(`${linkPath}/${entry.path}`, data);
  }
}
