import path from "node:path";
import { parseArgs } from "node:util";
import type { ConfigFile } from "./config.js";
import { ConfigError } from "./config-error.js";
import { isLoopback, startServer, type RunningServer } from "./server.js";
import { setServerV8Flags } from "./server-v8-flags.js";
import { StoreLockedError } from "./store/event-store.js";
import {
  configFileOf,
  existingDirectory,
  resolveWorkdir,
  SETTINGS,
  settingOptions,
  Settings,
  type UsageError,
} from "./settings.js";
import { VERSION } from "./version.js";
import { capYoungGeneration, DEFAULT_YOUNG_GENERATION_MIB } from "./young-generation.js";

const HELP = `sandbox-agent ${VERSION}: run ACP coding agents and control them over HTTP.

Usage:
  sandbox-agent server [options]       start the server (default 127.0.0.1:2468)
  sandbox-agent install-agent ID       install an agent from npm into the data directory
  sandbox-agent agents                 list agents, install state and versions
  sandbox-agent help [COMMAND]         this help, or a command's (also COMMAND --help)
  sandbox-agent --version

Run 'sandbox-agent server --help' for the server's options.
`;

const SERVER_HELP = `Usage: sandbox-agent server [options]

Options (each also from an environment variable, or a key of the config file):
  -H, --host HOST             address to bind (default 127.0.0.1; a non-loopback address needs a token)
  -p, --port PORT             port (default 2468; 0 picks a free one)
  -t, --token TOKEN           require Authorization: Bearer TOKEN (must not be empty)
      --no-token              run without a token even on a non-loopback address (not recommended)
  -c, --config FILE           JSON config file (agents, limits, and every setting here by its key)
  -a, --default-agent ID      agent for an initialize that names none (unset: such an initialize is a 400)
  -w, --workdir DIR           agents' working directory (default <data-dir>/workspace; must exist)
      --fs-root DIR           root of the filesystem API /v2/fs/* (default the workdir; must exist)
  -d, --data-dir DIR          data directory (default $XDG_DATA_HOME/sandbox-agent or ~/.local/share/sandbox-agent)
  -l, --log-level LEVEL       debug | info | warn | error (default info)
      --log-format FORMAT     text | json (one object per line) (default text)
      --allow-client-env NAMES  variables every agent accepts from clients in initialize (comma-separated,
                              repeatable; "*" for any); per agent: config agents.<id>.clientEnv
      --auto-install          install a missing agent on initialize (else 409 saying how to install it)
      --allow-origin ORIGIN   allow browser requests from ORIGIN (repeatable)
      --allow-host HOST       accept this Host header besides loopback names (repeatable)
      --fs-max-upload BYTES   largest file upload accepted (default: unlimited)
      --in-memory             keep connections and events in memory only (default: in <data-dir>, where
                              they survive a restart); config key eventLog.inMemory
      --fsync                 fdatasync events before delivering them, to survive a power loss too;
                              config key eventLog.fsync
      --young-generation-mib MIB  stop V8's young generation growing once it reaches MIB (default 8;
                              0: no cap), which bounds the RSS a long stream adds
  -h, --help                  this help

Environment variables and config keys (precedence: flag > environment > config file > default):
${Object.values(SETTINGS)
  .map((s) => `  --${s.flag.padEnd(18)} $${s.env.padEnd(32)} ${s.key ?? "-"}`)
  .join("\n")}
An empty environment variable counts as unset, except $SANDBOX_AGENT_TOKEN, which is refused.

SIGINT/SIGTERM stop every agent (SIGTERM, then SIGKILL after limits.killGraceMs) and exit; a second
signal SIGKILLs them at once.

Exit codes: 0 clean shutdown, 1 runtime error (e.g. the port is in use), 2 usage or configuration error.
`;

function fail(message: string): never {
  process.stderr.write(`sandbox-agent: ${message}\nRun 'sandbox-agent --help' for usage.\n`);
  process.exit(2);
}

/** A runtime error the user can fix: one line saying what to do, exit 1, no stack trace. */
function fatal(message: string): never {
  process.stderr.write(`sandbox-agent: ${message}\n`);
  process.exit(1);
}

async function loadConfig(file: string | undefined, usageError: UsageError): Promise<ConfigFile> {
  // config.js validates with zod: imported only when there is a file to validate.
  return file === undefined ? {} : (await import("./config.js")).loadConfigOr(file, usageError);
}

async function serverCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      ...settingOptions(),
      "no-token": { type: "boolean" },
      "auto-install": { type: "boolean" },
      "allow-origin": { type: "string", multiple: true },
      "allow-host": { type: "string", multiple: true },
      "fs-max-upload": { type: "string" },
      "in-memory": { type: "boolean" },
      fsync: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
  if (values.help) return void process.stdout.write(SERVER_HELP);
  const configFile = configFileOf(values, process.env);
  const config = await loadConfig(configFile, fail);
  const settings = new Settings(
    {
      flags: values,
      env: process.env,
      config,
      configDir: configFile === undefined ? undefined : path.dirname(path.resolve(configFile)),
    },
    fail,
  );
  const host = settings.string("host")?.value ?? "127.0.0.1";
  const port = settings.port();
  if (values["no-token"] && settings.pick("token")?.from === "--token")
    fail("--token and --no-token exclude each other");
  // --no-token is a flag: it wins over a token from the environment or the config file.
  const token = values["no-token"] ? undefined : settings.token();
  if (!isLoopback(host) && token === undefined && !values["no-token"]) {
    fail(`refusing to listen on ${host} without a token (--token; pass --no-token to accept the risk)`);
  }
  const dataDir = settings.dataDir();
  const workdir = resolveWorkdir(settings.path("workdir"), dataDir, fail);
  const fsRootGiven = settings.path("fsRoot");
  const fsRoot = fsRootGiven === undefined ? workdir : existingDirectory(fsRootGiven, fail);
  const fsMaxUpload = values["fs-max-upload"] === undefined ? undefined : Number(values["fs-max-upload"]);
  if (fsMaxUpload !== undefined && !(Number.isSafeInteger(fsMaxUpload) && fsMaxUpload >= 0)) {
    fail(`invalid --fs-max-upload ${values["fs-max-upload"]}`);
  }
  const youngGenerationMiB = settings.youngGenerationMiB(DEFAULT_YOUNG_GENERATION_MIB);
  let running: RunningServer;
  try {
    running = await startServer({
      host,
      port,
      token,
      agents: config.agents,
      defaultAgent: settings.string("defaultAgent")?.value,
      autoInstall: values["auto-install"] ?? config.autoInstall,
      allowClientEnv: settings.list("allowClientEnv"),
      allowedOrigins: [...(config.allowedOrigins ?? []), ...(values["allow-origin"] ?? [])],
      allowedHosts: [...(config.allowedHosts ?? []), ...(values["allow-host"] ?? [])],
      dataDir,
      workdir,
      fsRoot,
      fsMaxUploadBytes: fsMaxUpload,
      limits: config.limits,
      processLimits: config.processes,
      eventLog: {
        ...config.eventLog,
        ...(values["in-memory"] ? { inMemory: true } : {}),
        ...(values.fsync ? { fsync: true } : {}),
      },
      logLevel: settings.logLevel(),
      logFormat: settings.logFormat(),
      // Before any stream, but not on an idle server (it loads node:perf_hooks).
      onFirstWork: () => capYoungGeneration(youngGenerationMiB),
      // After the start path's built-ins (dns and cluster load with the listener) and the first
      // connection's one-time imports, whose module resolution (~30 `path.resolve` calls) made
      // `path`'s normalizeString hot enough for TurboFan under the server's budget: see
      // server-v8-flags.ts.
      onConnectionCodeLoaded: setServerV8Flags,
    });
  } catch (error) {
    if (error instanceof ConfigError) fail(error.message);
    // A data directory in use by another server: the message says what to do.
    if (error instanceof StoreLockedError) fatal(error.message);
    const hint = listenProblem(error, host, port);
    if (hint) fatal(hint);
    throw error;
  }
  const out = (line: string) => process.stdout.write(`sandbox-agent ${line}\n`);
  out(`listening on ${running.url}`);
  out(`inspector at ${running.url}/ui/${token !== undefined ? " (it asks for the token)" : ""}`);
  out(`workdir ${workdir}${fsRoot === workdir ? "" : `, file API root ${fsRoot}`}`);
  handleSignals(running);
  lastResort(running);
}

/** One line saying what to do when the listener could not be opened, else undefined. */
function listenProblem(error: unknown, host: string, port: number): string | undefined {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const where = `${host}:${port}`;
  switch (code) {
    case "EADDRINUSE":
      return `${where} is in use (another server?): stop it, or pick another port with --port (0 picks a free one)`;
    case "EACCES":
      return `not allowed to listen on ${where}: ports below 1024 need privileges; pick another with --port`;
    case "EADDRNOTAVAIL":
      return `${host} is not an address of this machine: pick one it has with --host (default 127.0.0.1)`;
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `cannot resolve --host ${host}: give an IP address or a name this machine resolves`;
    default:
      return undefined;
  }
}

/**
 * SIGINT/SIGTERM: shut down (every agent stopped, then exit 0). A second signal (Ctrl-C twice, a
 * supervisor repeating itself) hurries it: SIGKILL to every agent now instead of after the grace.
 * A third exits at once; the agents were SIGKILLed by the second. The handlers stay installed, so
 * the default action (exit at once, orphaning agents) never runs.
 */
function handleSignals(running: RunningServer): void {
  let received = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    received++;
    if (received === 1) {
      process.stderr.write(`sandbox-agent: ${signal}, shutting down (again to stop agents at once)\n`);
      void running.close().then(() => process.exit(0));
    } else if (received === 2) {
      process.stderr.write(`sandbox-agent: ${signal} again, killing every agent now\n`);
      running.hurry();
    } else {
      running.hurry();
      process.exit(1);
    }
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
}

/**
 * Every path we know of handles its own errors: request handlers answer a problem, agent stream
 * callbacks fail their connection (`Connection.guarded`), timers and promise chains end in a
 * catch, and every emitter that can emit "error" has a listener. An exception that still gets
 * here is a bug whose damage cannot be known: a connection's state half-updated, a pending
 * request that will never be answered, an agent no longer tracked. Carrying on would hide that
 * broken state; Node's default (exit at once) would orphan every agent that ignores stdin EOF.
 * So: log it with its stack, stop every agent as a SIGTERM would, and exit 1 for a supervisor to
 * restart a clean server. Unhandled rejections are treated the same (Node's own default since 15).
 */
function lastResort(running: RunningServer): void {
  let failing = false;
  const fatalError = (error: unknown): void => {
    process.stderr.write(
      `sandbox-agent: internal error, stopping every agent and exiting: ${
        error instanceof Error ? (error.stack ?? error.message) : String(error)
      }\n`,
    );
    if (failing) return;
    failing = true;
    void running.close().finally(() => process.exit(1));
    // If the broken state keeps the shutdown from finishing: SIGKILL every agent and go.
    setTimeout(
      () => {
        running.hurry();
        process.exit(1);
      },
      2 * running.limits.killGraceMs + 1000,
    ).unref();
  };
  process.on("uncaughtException", fatalError);
  process.on("unhandledRejection", fatalError);
  // Lost stdout/stderr (a supervisor that closed its end) must not end the server with EPIPE.
  process.stdout.on("error", () => {});
  process.stderr.on("error", () => {});
}

/**
 * A reader that stopped reading (`sandbox-agent agents | head`) is no error: exit quietly, as
 * Unix tools do, instead of crashing on EPIPE.
 */
function exitQuietlyOnEpipe(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "EPIPE") process.exit(0);
      throw error;
    });
  }
}

/**
 * A launcher may move `NODE_EXTRA_CA_CERTS` to `SANDBOX_AGENT_NODE_EXTRA_CA_CERTS` (the SDK's
 * embedded server does): Node parses that PEM bundle while it starts, which doubled the start of
 * a server on a machine whose whole environment names the system bundle, and the server makes no
 * TLS connection itself. The processes it starts (npm, agents and processes given the variable)
 * get it back under its own name.
 */
function restoreExtraCaCerts(env: NodeJS.ProcessEnv): void {
  const moved = env.SANDBOX_AGENT_NODE_EXTRA_CA_CERTS;
  if (moved === undefined) return;
  env.NODE_EXTRA_CA_CERTS ??= moved;
  delete env.SANDBOX_AGENT_NODE_EXTRA_CA_CERTS;
}

async function main(argv: string[]): Promise<void> {
  restoreExtraCaCerts(process.env);
  const [command, ...rest] = argv;
  if (command === "--version" || command === "-v") return void process.stdout.write(`${VERSION}\n`);
  if (command === "help" && rest[0] !== undefined) return main([rest[0], "--help"]);
  if (command === undefined || command === "--help" || command === "-h" || command === "help") {
    return void process.stdout.write(HELP);
  }
  if (command === "server") return serverCommand(rest);
  if (command === "install-agent" || command === "agents") {
    exitQuietlyOnEpipe();
    // The agent commands share the control plane's zod schemas: imported only when run.
    const commands = await import("./agent-commands.js");
    return command === "install-agent"
      ? commands.installAgentCommand(rest, fail)
      : commands.listAgentsCommand(rest, fail);
  }
  fail(`unknown command ${JSON.stringify(command)}`);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof TypeError && "code" in error && String(error.code).startsWith("ERR_PARSE_ARGS")) {
    fail(error.message);
  }
  if (error instanceof ConfigError) fail(error.message);
  process.stderr.write(
    `sandbox-agent: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
