import path from "node:path";
import { parseArgs } from "node:util";
import { loadConfigOr } from "./config.js";
import { describeAgent } from "./control-plane/agents.js";
import { ProblemError } from "./http/problem.js";
import { configFileOf, Settings, type UsageError } from "./settings.js";
import { installAgent, type InstallResult } from "./agents/install.js";
import { NpmProgress } from "./agents/install-progress.js";
import { AgentRegistry } from "./agents/registry.js";

/** Exit codes: 0 installed (or already), 1 install failed, 2 usage error, 3 registry unreachable. */
const EXIT_UNREACHABLE = 3;

const COMMON_HELP = `  -d, --data-dir DIR   data directory (also $SANDBOX_AGENT_DATA_DIR or the config's dataDir)
  -c, --config FILE    config file whose agents are listed too (also $SANDBOX_AGENT_CONFIG)
  -h, --help           this help`;

const INSTALL_HELP = `Usage: sandbox-agent install-agent ID [options]

Installs agent ID's npm packages into <data-dir>/agents/ID/ (packages already at the wanted
versions are left alone). Progress goes to stderr (one updating line on a terminal, npm's lines
otherwise), the result to stdout.

Options:
      --version V      install version V of the agent's main package instead of the pinned one
      --json           print the result, or the problem, as one JSON object on stdout
${COMMON_HELP}

Exit codes: 0 installed (or already), 1 install failed, 2 usage error, 3 npm registry unreachable.
`;

const AGENTS_HELP = `Usage: sandbox-agent agents [options]

Lists the agents this server knows: built-ins and config agents, install state and versions.

Options:
      --json           the GET /v2/agents document instead of one line per agent
${COMMON_HELP}
`;

const commonOptions = {
  json: { type: "boolean" },
  "data-dir": { type: "string", short: "d" },
  config: { type: "string", short: "c" },
  help: { type: "boolean", short: "h" },
} as const;

/** Usage errors of a command run with `--json` are JSON on stdout too (and a line on stderr). */
function usageErrorFor(argv: string[], usageError: UsageError): UsageError {
  if (!argv.includes("--json")) return usageError;
  return (message) => {
    process.stdout.write(
      JSON.stringify({ type: "usage-error", title: "Usage Error", detail: message }) + "\n",
    );
    return usageError(message);
  };
}

function parse<T extends Parameters<typeof parseArgs>[0]>(config: T, usageError: UsageError) {
  try {
    return parseArgs(config);
  } catch (error) {
    return usageError((error as Error).message);
  }
}

/** The agents of the data directory and config file the flags, environment and config name. */
function registryFrom(
  values: Record<string, unknown>,
  usageError: UsageError,
): { registry: AgentRegistry; dataDir: string } {
  const file = configFileOf(values, process.env);
  const config = file === undefined ? {} : loadConfigOr(file, usageError);
  const configDir = file === undefined ? undefined : path.dirname(path.resolve(file));
  const dataDir = new Settings({ flags: values, env: process.env, config, configDir }, usageError).dataDir();
  return { registry: new AgentRegistry(config.agents, dataDir), dataDir };
}

/** `sandbox-agent install-agent ID`: progress on stderr, the result on stdout (JSON with --json). */
export async function installAgentCommand(argv: string[], fail: UsageError): Promise<void> {
  const usageError: UsageError = usageErrorFor(argv, fail);
  const { values, positionals } = parse(
    { args: argv, options: { ...commonOptions, version: { type: "string" } }, allowPositionals: true },
    usageError,
  );
  if (values.help) return void process.stdout.write(INSTALL_HELP);
  if (positionals.length !== 1) usageError("install-agent takes exactly one agent id");
  const { registry } = registryFrom(values, usageError);
  const agent = registry.get(positionals[0]!);
  if (!agent)
    usageError(`unknown agent ${JSON.stringify(positionals[0])} (known: ${registry.ids().join(", ")})`);
  // With --json, stdout is for the result: progress only where a person watches.
  const display = values.json && !process.stderr.isTTY ? undefined : new ProgressDisplay(agent.id);
  try {
    const result = await installAgent(agent, {
      ...(typeof values.version === "string" ? { version: values.version } : {}),
      onProgress: (line) => display?.line(line),
    });
    display?.done();
    process.stdout.write(values.json ? JSON.stringify(result) + "\n" : summary(result, display?.progress));
  } catch (error) {
    display?.done();
    const problem =
      error instanceof ProblemError
        ? error.problem
        : { type: "internal-error", title: "Internal Error", detail: String(error) };
    if (values.json) process.stdout.write(JSON.stringify(problem) + "\n");
    process.stderr.write(`sandbox-agent: ${problem.detail}\n`);
    process.exitCode = problem.type.endsWith("/registry-unreachable") ? EXIT_UNREACHABLE : 1;
  }
}

function summary(result: InstallResult, progress: NpmProgress | undefined): string {
  if (result.version === null) return `${result.agent}: nothing to install\n`;
  if (result.alreadyInstalled) return `${result.agent} ${result.version} already installed\n`;
  const requests = progress ? `, ${progress.fetches} registry requests` : "";
  const packages = `${result.packages.length} package${result.packages.length === 1 ? "" : "s"}`;
  return `${result.agent} ${result.version} installed in ${(result.durationMs / 1000).toFixed(1)} s (${packages}${requests})\n`;
}

/**
 * Install progress on stderr: on a terminal one line rewritten in place (requests so far, the
 * last package), elsewhere (a log, CI) npm's lines as they come.
 */
class ProgressDisplay {
  readonly progress = new NpmProgress();
  private readonly tty = process.stderr.isTTY === true;
  private shown = false;

  constructor(private readonly agentId: string) {}

  line(text: string): void {
    this.progress.take(text);
    if (!this.tty) return void process.stderr.write(`${text}\n`);
    const { fetches, lastPackage } = this.progress;
    const status = `installing ${this.agentId}: ${fetches} registry requests${lastPackage ? ` (${lastPackage})` : ""}`;
    process.stderr.write(`\r\x1b[K${status.slice(0, Math.max(20, (process.stderr.columns || 80) - 1))}`);
    this.shown = true;
  }

  /** Clears the progress line, so the summary stands alone. */
  done(): void {
    if (this.shown) process.stderr.write("\r\x1b[K");
    this.shown = false;
  }
}

/** `sandbox-agent agents`: one line per agent, or the `GET /v2/agents` JSON with --json. */
export function listAgentsCommand(argv: string[], fail: UsageError): void {
  const usageError: UsageError = usageErrorFor(argv, fail);
  const { values } = parse({ args: argv, options: commonOptions }, usageError);
  if (values.help) return void process.stdout.write(AGENTS_HELP);
  const { registry, dataDir } = registryFrom(values, usageError);
  const agents = registry.list().map((a) => describeAgent(a, dataDir));
  if (values.json) return void process.stdout.write(JSON.stringify({ agents }, null, 2) + "\n");
  for (const a of agents) {
    const state = !a.installable ? "ready" : a.installed ? `installed ${a.version}` : "not installed";
    const pkg = a.packages[0] ? `${a.packages[0].name}@${a.packages[0].version}` : a.source;
    process.stdout.write(`${a.id.padEnd(12)} ${state.padEnd(22)} ${pkg}\n`);
  }
}
