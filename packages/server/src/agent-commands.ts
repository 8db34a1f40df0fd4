import { parseArgs } from "node:util";
import { loadConfigOr } from "./config.js";
import { defaultDataDir } from "./data-dir.js";
import { describeAgent } from "./control-plane/agents.js";
import { ProblemError } from "./http/problem.js";
import { installAgent } from "./agents/install.js";
import { AgentRegistry } from "./agents/registry.js";

/** Exit codes: 0 installed (or already), 1 install failed, 2 usage error, 3 registry unreachable. */
const EXIT_UNREACHABLE = 3;

type UsageError = (message: string) => never;

function registryFrom(
  values: { "data-dir"?: string; config?: string },
  usageError: UsageError,
): { registry: AgentRegistry; dataDir: string } {
  const dataDir = values["data-dir"] ?? defaultDataDir();
  const agents = values.config ? loadConfigOr(values.config, usageError).agents : undefined;
  return { registry: new AgentRegistry(agents, dataDir), dataDir };
}

const commonOptions = {
  json: { type: "boolean" },
  "data-dir": { type: "string" },
  config: { type: "string" },
} as const;

/** `sandbox-agent install-agent ID`: npm's progress on stderr, the result on stdout (JSON with --json). */
export async function installAgentCommand(argv: string[], usageError: UsageError): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...commonOptions, version: { type: "string" } },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length !== 1) usageError("install-agent takes exactly one agent id");
  const { registry } = registryFrom(values, usageError);
  const agent = registry.get(positionals[0]!);
  if (!agent)
    usageError(`unknown agent ${JSON.stringify(positionals[0])} (known: ${registry.ids().join(", ")})`);
  const showProgress = !values.json || process.stderr.isTTY;
  try {
    const result = await installAgent(agent, {
      version: values.version,
      onProgress: showProgress ? (line) => process.stderr.write(`${line}\n`) : undefined,
    });
    if (values.json) process.stdout.write(JSON.stringify(result) + "\n");
    else if (result.version === null) process.stdout.write(`${agent.id}: nothing to install\n`);
    else
      process.stdout.write(
        `${agent.id} ${result.version} ${result.alreadyInstalled ? "already installed" : `installed in ${result.durationMs} ms`}\n`,
      );
  } catch (error) {
    if (!(error instanceof ProblemError)) throw error;
    if (values.json) process.stdout.write(JSON.stringify(error.problem) + "\n");
    process.stderr.write(`sandbox-agent: ${error.problem.detail}\n`);
    process.exitCode = error.problem.type.endsWith("/registry-unreachable") ? EXIT_UNREACHABLE : 1;
  }
}

/** `sandbox-agent agents`: one line per agent, or the `GET /v2/agents` JSON with --json. */
export function listAgentsCommand(argv: string[], usageError: UsageError): void {
  const { values } = parseArgs({ args: argv, options: commonOptions, strict: true });
  const { registry, dataDir } = registryFrom(values, usageError);
  const agents = registry.list().map((a) => describeAgent(a, dataDir));
  if (values.json) return void process.stdout.write(JSON.stringify({ agents }, null, 2) + "\n");
  for (const a of agents) {
    const state = !a.installable ? "ready" : a.installed ? `installed ${a.version}` : "not installed";
    const pkg = a.packages[0] ? `${a.packages[0].name}@${a.packages[0].version}` : a.source;
    process.stdout.write(`${a.id.padEnd(12)} ${state.padEnd(22)} ${pkg}\n`);
  }
}
