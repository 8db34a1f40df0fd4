import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { ProblemError } from "../http/problem.js";
import { withInstallLock } from "./install-lock.js";
import type { AgentDefinition, AgentInstallSpec, AgentPackage } from "./types.js";

export interface InstallOptions {
  /** Overrides the pinned version of the agent's main package. */
  version?: string;
  /** Each line npm prints while installing. */
  onProgress?(line: string): void;
  /** Environment of the npm process (registry, proxy, cache settings); default: the server's. */
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
}

export interface InstallResult {
  agent: string;
  /** The installed version of the main package; null for agents that need no install. */
  version: string | null;
  alreadyInstalled: boolean;
  durationMs: number;
  packages: AgentPackage[];
}

export interface InstallState {
  installable: boolean;
  installed: boolean;
  version: string | null;
}

const DEFAULT_TIMEOUT_MS = 15 * 60_000;
const OUTPUT_TAIL_LINES = 30;
/** npm error codes that mean the registry could not be reached (as opposed to a bad package or version). */
const UNREACHABLE = /\b(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNRESET|EHOSTUNREACH|ENETUNREACH)\b/;

const running = new Map<string, Promise<InstallResult>>();

export function installedVersionOf(install: AgentInstallSpec, name: string): string | null {
  const file = path.join(install.dir, "node_modules", name, "package.json");
  if (!existsSync(file)) return null;
  try {
    const version: unknown = (JSON.parse(readFileSync(file, "utf8")) as { version?: unknown }).version;
    return typeof version === "string" ? version : null;
  } catch {
    return null;
  }
}

export function installState(agent: AgentDefinition): InstallState {
  if (!agent.install) return { installable: false, installed: true, version: null };
  const versions = agent.install.packages.map((p) => installedVersionOf(agent.install!, p.name));
  return { installable: true, installed: versions.every((v) => v !== null), version: versions[0] ?? null };
}

function targetPackages(install: AgentInstallSpec, version: string | undefined): AgentPackage[] {
  return install.packages.map((p, i) => (i === 0 && version !== undefined ? { ...p, version } : p));
}

/**
 * Installs an agent's npm packages into its own directory. Idempotent: packages already at the
 * wanted versions are not touched. Installs of one agent run one after another (the later one then finds the packages in place).
 */
export async function installAgent(
  agent: AgentDefinition,
  options: InstallOptions = {},
): Promise<InstallResult> {
  const install = agent.install;
  if (!install)
    return { agent: agent.id, version: null, alreadyInstalled: true, durationMs: 0, packages: [] };
  const previous = running.get(install.dir) ?? Promise.resolve();
  const job = previous.catch(() => undefined).then(() => runInstall(agent.id, install, options));
  running.set(install.dir, job);
  try {
    return await job;
  } finally {
    if (running.get(install.dir) === job) running.delete(install.dir);
  }
}

async function runInstall(
  id: string,
  install: AgentInstallSpec,
  options: InstallOptions,
): Promise<InstallResult> {
  const started = Date.now();
  const packages = targetPackages(install, options.version);
  const result = (alreadyInstalled: boolean): InstallResult => ({
    agent: id,
    version: packages[0]!.version,
    alreadyInstalled,
    durationMs: Date.now() - started,
    packages,
  });
  if (missingPackages(install, packages).length === 0) return result(true);
  mkdirSync(install.dir, { recursive: true });
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const locked = await withInstallLock(install.dir, timeoutMs, async () => {
    // Another process may have installed it while this one waited for the lock.
    if (missingPackages(install, packages).length === 0) return true;
    await npmInstall(id, install, packages, options);
    return false;
  });
  if (!locked) throw installFailed(id, `another install held ${install.dir} for over ${timeoutMs} ms.`, []);
  return result(locked.value);
}

function missingPackages(install: AgentInstallSpec, packages: AgentPackage[]): AgentPackage[] {
  return packages.filter((p) => installedVersionOf(install, p.name) !== p.version);
}

async function npmInstall(
  id: string,
  install: AgentInstallSpec,
  packages: AgentPackage[],
  options: InstallOptions,
): Promise<void> {
  const manifest = path.join(install.dir, "package.json");
  if (!existsSync(manifest)) {
    writeFileSync(manifest, JSON.stringify({ name: `sandbox-agent-${id}`, private: true }, null, 2) + "\n");
  }
  await runNpm(id, install.dir, packages, options);
  const wrong = missingPackages(install, packages)[0];
  if (wrong) {
    const found = installedVersionOf(install, wrong.name) ?? "nothing";
    throw installFailed(id, `npm finished but ${wrong.name} is at ${found}, not ${wrong.version}.`, []);
  }
}

function runNpm(id: string, dir: string, packages: AgentPackage[], options: InstallOptions): Promise<void> {
  const args = [
    "install",
    "--no-audit",
    "--no-fund",
    "--save-exact",
    // Native binaries come in optional dependencies; no agent here needs an install script.
    "--ignore-scripts",
    // `http` prints one line per fetch: progress a user can follow without a TTY.
    "--loglevel=http",
    // Keeps an unreachable registry from stalling for minutes of back-off.
    "--fetch-retry-mintimeout=1000",
    "--fetch-retry-maxtimeout=10000",
    ...packages.map((p) => `${p.name}@${p.version}`),
  ];
  const npm = options.env?.SANDBOX_AGENT_NPM ?? process.env.SANDBOX_AGENT_NPM ?? "npm";
  return new Promise((resolve, reject) => {
    const child = spawn(npm, args, {
      cwd: dir,
      env: options.env ?? process.env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    const tail: string[] = [];
    const timer = setTimeout(() => {
      killGroup(child.pid);
      reject(
        installFailed(id, `npm did not finish within ${options.timeoutMs ?? DEFAULT_TIMEOUT_MS} ms.`, tail),
      );
    }, options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    // A spawn error (ENOENT, or EMFILE, which leaves no pipes) is an event, fatal if unheard.
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(installFailed(id, `Cannot run ${npm}: ${error.message}`, tail));
    });
    if (!child.stdout || !child.stderr) return;
    const onLine = (line: string) => {
      if (line.trim() === "") return;
      tail.push(line);
      if (tail.length > OUTPUT_TAIL_LINES) tail.shift();
      options.onProgress?.(line);
    };
    forwardLines(child.stdout, onLine);
    forwardLines(child.stderr, onLine);
    child.once("close", (code) => {
      clearTimeout(timer);
      if (code === 0) return resolve();
      const output = tail.join("\n");
      reject(
        UNREACHABLE.test(output)
          ? registryUnreachable(id, tail)
          : installFailed(id, `npm exited with ${code}.`, tail),
      );
    });
  });
}

function forwardLines(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void {
  let buffer = "";
  stream.setEncoding("utf8");
  stream.on("data", (chunk: string) => {
    buffer += chunk;
    const lines = buffer.split(/\r?\n/);
    buffer = lines.pop() ?? "";
    lines.forEach(onLine);
  });
  stream.on("end", () => onLine(buffer));
}

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
}

function registryUnreachable(id: string, tail: string[]): ProblemError {
  return new ProblemError(
    503,
    "registry-unreachable",
    "Package Registry Unreachable",
    `Cannot install agent ${JSON.stringify(id)}: the npm registry could not be reached. ` +
      "Check the network or set npm_config_registry to a reachable mirror.",
    { agent: id, npmOutput: tail },
  );
}

function installFailed(id: string, detail: string, tail: string[]): ProblemError {
  return new ProblemError(
    502,
    "agent-install-failed",
    "Agent Install Failed",
    `Cannot install agent ${JSON.stringify(id)}: ${detail}`,
    {
      agent: id,
      npmOutput: tail,
    },
  );
}

/** The 409 answer to an `initialize` for an agent that is not installed (and auto-install is off). */
export function notInstalled(id: string): ProblemError {
  return new ProblemError(
    409,
    "agent-not-installed",
    "Agent Not Installed",
    `Agent ${JSON.stringify(id)} is not installed. Run \`sandbox-agent install-agent ${id}\` or ` +
      `POST /v2/agents/${id}/install, or start the server with --auto-install.`,
    {
      agent: id,
      install: { command: `sandbox-agent install-agent ${id}`, endpoint: `/v2/agents/${id}/install` },
    },
  );
}
