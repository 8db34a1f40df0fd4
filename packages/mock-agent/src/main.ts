import { ndJsonStream } from "@agentclientprotocol/sdk";
import { mockAgentApp } from "./agent.js";
import { parseFlags, type MockAgentFlags } from "./flags.js";
import { carriageReturnAfterBrace, flushStdout, stdinSource, stdoutSink } from "./io.js";
import type { AgentState } from "./state.js";
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
  // A closed stdout or stderr (client gone) must not crash the agent with EPIPE; stdin EOF ends it
  // (and with --ignore-sigterm --ignore-stdin-eof nothing but SIGKILL does).
  process.stdout.on("error", () => undefined);
  process.stderr.on("error", () => undefined);
  const noise = (what: string) => (bytes: number) =>
    void process.stderr.write(`mock-agent noise: ${what} ${bytes} bytes\n`);
  const onLine = flags.stderrNoise ? (line: string): void => noise("received")(line.length) : undefined;
  const output = stdoutSink(
    flags.stderrNoise ? noise("sent") : undefined,
    flags.crInJson ? carriageReturnAfterBrace : undefined,
  );
  const stream = ndJsonStream(output, stdinSource({ logFile: flags.stdinLog, onLine }), {
    maxMessageBytes: 256 * 1024 * 1024,
  });
  const state: AgentState = {
    flags,
    store: new SessionStore(process.env["MOCK_AGENT_STATE_DIR"] || undefined),
    authenticated: false,
    clientCapabilities: undefined,
    turns: new Map(),
  };
  const connection = mockAgentApp(state).connect(stream);
  void connection.closed.then(() => {
    // A timer keeps the event loop, hence the process, alive once stdin is gone.
    if (flags.ignoreStdinEof) setInterval(() => undefined, 60_000);
    else void exitCleanly(0);
  });
}

start(readFlags());
