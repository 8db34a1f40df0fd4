import { statSync } from "node:fs";
import { parseArgs } from "node:util";
import type { ConfigFile } from "./config.js";
import { defaultDataDir } from "./data-dir.js";
import { isLoopback, startServer, type RunningServer } from "./server.js";
import { StoreLockedError } from "./store/event-store.js";
import type { LogLevel } from "./log.js";
import { VERSION } from "./version.js";

const HELP = `sandbox-agent ${VERSION}: run ACP coding agents and control them over HTTP.

Usage:
  sandbox-agent server [options]     start the server (default 127.0.0.1:2468)
  sandbox-agent install-agent ID [--version V] [--json] [--data-dir DIR] [--config FILE]
                                     install an agent from npm into the data directory
  sandbox-agent agents [--json] [--data-dir DIR] [--config FILE]
                                     list agents, install state and versions
  sandbox-agent --help | --version

Server options:
  --host HOST             address to bind (default 127.0.0.1; a non-loopback address needs --token)
  --port PORT             port (default 2468; 0 picks a free one)
  --token TOKEN           require Authorization: Bearer TOKEN (also $SANDBOX_AGENT_TOKEN)
  --no-token              run without a token even on a non-loopback address (not recommended)
  --config FILE           JSON config: { "agents": { "<id>": { "command", "args", "env", "passEnv", "cwd" } }, ... }
  --default-agent ID      agent for initialize requests that name none
  --auto-install          install a missing agent on initialize (else 409 saying how to install it)
  --allow-origin ORIGIN   allow browser requests from ORIGIN (repeatable)
  --allow-host HOST       accept this Host header besides loopback names (repeatable)
  --workdir DIR           working directory for agents (default: current directory)
  --fs-root DIR           root of the filesystem API /v2/fs/* (default: the workdir)
  --fs-max-upload BYTES   largest file upload accepted (default: unlimited)
  --data-dir DIR          data directory (default $SANDBOX_AGENT_DATA_DIR or ~/.local/share/sandbox-agent);
                          connections and their events are kept there and survive a restart
  --in-memory             keep connections and events in memory only (tests, throwaway servers)
  --fsync                 fdatasync events before delivering them, to survive a power loss too
  --log-level LEVEL       debug | info | warn | error (default info)

SIGINT/SIGTERM stop every agent (SIGTERM, then SIGKILL after limits.killGraceMs) and exit; a second
signal SIGKILLs them at once.

Exit codes: 0 clean shutdown, 1 runtime error, 2 usage or configuration error.
`;

function fail(message: string): never {
  process.stderr.write(`sandbox-agent: ${message}\nRun 'sandbox-agent --help' for usage.\n`);
  process.exit(2);
}

async function serverCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      host: { type: "string" },
      port: { type: "string" },
      token: { type: "string" },
      "no-token": { type: "boolean" },
      config: { type: "string" },
      "default-agent": { type: "string" },
      "auto-install": { type: "boolean" },
      "allow-origin": { type: "string", multiple: true },
      "allow-host": { type: "string", multiple: true },
      workdir: { type: "string" },
      "fs-root": { type: "string" },
      "fs-max-upload": { type: "string" },
      "data-dir": { type: "string" },
      "in-memory": { type: "boolean" },
      fsync: { type: "boolean" },
      "log-level": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(HELP);
    return;
  }
  // config.js validates with zod: imported only when there is a file to validate.
  const config: ConfigFile = values.config
    ? (await import("./config.js")).loadConfigOr(values.config, fail)
    : {};
  const host = values.host ?? "127.0.0.1";
  const port = values.port === undefined ? 2468 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`invalid --port ${values.port}`);
  const token = values.token ?? process.env.SANDBOX_AGENT_TOKEN;
  if (values.token && values["no-token"]) fail("--token and --no-token exclude each other");
  if (!isLoopback(host) && !token && !values["no-token"]) {
    fail(`refusing to listen on ${host} without --token (pass --no-token to accept the risk)`);
  }
  const fsRoot = values["fs-root"];
  if (fsRoot !== undefined && !statSync(fsRoot, { throwIfNoEntry: false })?.isDirectory()) {
    fail(`--fs-root ${fsRoot} is not a directory`);
  }
  const fsMaxUpload = values["fs-max-upload"] === undefined ? undefined : Number(values["fs-max-upload"]);
  if (fsMaxUpload !== undefined && !(Number.isSafeInteger(fsMaxUpload) && fsMaxUpload >= 0)) {
    fail(`invalid --fs-max-upload ${values["fs-max-upload"]}`);
  }
  const logLevel = (values["log-level"] ?? "info") as LogLevel;
  if (!["debug", "info", "warn", "error"].includes(logLevel)) fail(`invalid --log-level ${logLevel}`);
  const running = await startServer({
    host,
    port,
    token: values["no-token"] ? undefined : token,
    agents: config.agents,
    defaultAgent: values["default-agent"] ?? config.defaultAgent,
    autoInstall: values["auto-install"] ?? config.autoInstall,
    allowedOrigins: [...(config.allowedOrigins ?? []), ...(values["allow-origin"] ?? [])],
    allowedHosts: [...(config.allowedHosts ?? []), ...(values["allow-host"] ?? [])],
    dataDir: values["data-dir"] ?? defaultDataDir(),
    workdir: values.workdir,
    fsRoot,
    fsMaxUploadBytes: fsMaxUpload,
    limits: config.limits,
    processLimits: config.processes,
    eventLog: {
      ...config.eventLog,
      ...(values["in-memory"] ? { inMemory: true } : {}),
      ...(values.fsync ? { fsync: true } : {}),
    },
    logLevel,
  });
  process.stdout.write(`sandbox-agent listening on ${running.url}\n`);
  process.stdout.write(
    `sandbox-agent inspector at ${running.url}/ui/${token && !values["no-token"] ? " (it asks for the token)" : ""}\n`,
  );
  handleSignals(running);
  lastResort(running);
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
  const fatal = (error: unknown): void => {
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
  process.on("uncaughtException", fatal);
  process.on("unhandledRejection", fatal);
  // Lost stdout/stderr (a supervisor that closed its end) must not end the server with EPIPE.
  process.stdout.on("error", () => {});
  process.stderr.on("error", () => {});
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === "--version" || command === "-v") return void process.stdout.write(`${VERSION}\n`);
  if (command === undefined || command === "--help" || command === "-h" || command === "help") {
    return void process.stdout.write(HELP);
  }
  if (command === "server") return serverCommand(rest);
  // The agent commands share the control plane's zod schemas: imported only when run.
  if (command === "install-agent")
    return (await import("./agent-commands.js")).installAgentCommand(rest, fail);
  if (command === "agents") return (await import("./agent-commands.js")).listAgentsCommand(rest, fail);
  fail(`unknown command ${JSON.stringify(command)}`);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof TypeError && "code" in error && String(error.code).startsWith("ERR_PARSE_ARGS")) {
    fail(error.message);
  }
  // A data directory in use by another server: the message says what to do, a stack would not help.
  if (error instanceof StoreLockedError) {
    process.stderr.write(`sandbox-agent: ${error.message}\n`);
    process.exit(1);
  }
  process.stderr.write(
    `sandbox-agent: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
