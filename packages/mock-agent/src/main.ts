import { ndJsonStream } from "@agentclientprotocol/sdk";
import { mockAgentApp } from "./agent.js";
import { parseFlags, type MockAgentFlags } from "./flags.js";
import { flushStdout, stdinSource, stdoutSink } from "./io.js";
import { SessionStore } from "./store.js";

function readFlags(): MockAgentFlags {
  try {
    return parseFlags(process.argv.slice(2), process.env["MOCK_AGENT_FLAGS"]);
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(2);
  }
}

async function exitCleanly(code: number): Promise<never> {
  await flushStdout().catch(() => undefined);
  process.exit(code);
}

function start(flags: MockAgentFlags): void {
  if (flags.exitOnStart !== undefined) process.exit(flags.exitOnStart);
  process.on("SIGTERM", () => {
    if (flags.ignoreSigterm) process.stderr.write("mock-agent: ignoring SIGTERM\n");
    else void exitCleanly(0);
  });
  // A closed stdout (client gone) must not crash the agent with EPIPE; stdin EOF ends it.
  process.stdout.on("error", () => undefined);
  const onLine = flags.stderrNoise
    ? (line: string): void => void process.stderr.write(`mock-agent noise: received ${line.length} bytes\n`)
    : undefined;
  const stream = ndJsonStream(stdoutSink(), stdinSource({ logFile: flags.stdinLog, onLine }), {
    maxMessageBytes: 256 * 1024 * 1024,
  });
  const state = {
    flags,
    store: new SessionStore(process.env["MOCK_AGENT_STATE_DIR"] || undefined),
    authenticated: false,
    clientCapabilities: undefined,
    turns: new Map(),
  };
  const connection = mockAgentApp(state).connect(stream);
  void connection.closed.then(() => exitCleanly(0));
}

start(readFlags());
