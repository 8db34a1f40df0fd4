/** Startup options of the mock agent, from argv and the `MOCK_AGENT_FLAGS` env var. */
export interface MockAgentFlags {
  hangInitialize: boolean;
  failInitialize: boolean;
  /** Exit code to exit with immediately at start, or undefined. */
  exitOnStart: number | undefined;
  ignoreSigterm: boolean;
  protocolVersion: number | undefined;
  stdinLog: string | undefined;
  stderrNoise: boolean;
  /** Keep running after stdin closes (like agents that ignore EOF); only a signal ends it. */
  ignoreStdinEof: boolean;
  /** Write every JSON line with a bare CR after its opening brace (valid JSON whitespace). */
  crInJson: boolean;
}

function integerArg(flag: string, value: string | undefined): number {
  const n = Number(value);
  if (value === undefined || !Number.isInteger(n))
    throw new Error(`mock-agent: ${flag} needs an integer, got ${value ?? "nothing"}`);
  return n;
}

/** Parses flags; env flags (whitespace separated) come first so argv can override them. */
export function parseFlags(
  argv: readonly string[],
  envFlags: string | undefined = undefined,
): MockAgentFlags {
  const args = [...(envFlags?.split(/\s+/).filter(Boolean) ?? []), ...argv];
  const flags: MockAgentFlags = {
    hangInitialize: false,
    failInitialize: false,
    exitOnStart: undefined,
    ignoreSigterm: false,
    protocolVersion: undefined,
    stdinLog: undefined,
    stderrNoise: false,
    ignoreStdinEof: false,
    crInJson: false,
  };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const next = args[i + 1];
    switch (arg) {
      case "--hang-initialize":
        flags.hangInitialize = true;
        break;
      case "--fail-initialize":
        flags.failInitialize = true;
        break;
      case "--exit-on-start":
        flags.exitOnStart = next !== undefined && /^\d+$/.test(next) ? integerArg(arg, args[++i]) : 1;
        break;
      case "--ignore-sigterm":
        flags.ignoreSigterm = true;
        break;
      case "--protocol-version":
        flags.protocolVersion = integerArg(arg, args[++i]);
        break;
      case "--stdin-log":
        if (next === undefined) throw new Error("mock-agent: --stdin-log needs a file path");
        flags.stdinLog = args[++i];
        break;
      case "--stderr-noise":
        flags.stderrNoise = true;
        break;
      case "--ignore-stdin-eof":
        flags.ignoreStdinEof = true;
        break;
      case "--cr-in-json":
        flags.crInJson = true;
        break;
      default:
        throw new Error(`mock-agent: unknown option ${arg}`);
    }
  }
  return flags;
}
