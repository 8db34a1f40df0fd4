/** Runs the sandbox-agent server as a child process on a loopback port (embedded mode). */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export interface ServerProcessOptions {
  /** Server CLI: a `.js`/`.mjs` file (run with this Node) or an executable. */
  serverBin: string;
  token: string;
  args: string[];
  env: Record<string, string | undefined>;
  startTimeoutMs: number;
}

const LISTENING = /sandbox-agent listening on (http:\/\/\S+)/;
const STDERR_TAIL_CHARS = 64 * 1024;
const KILL_GRACE_MS = 3000;

/**
 * Where the server CLI is: `$SANDBOX_AGENT_SERVER_BIN`, else the `@sandbox-agent/server` package's
 * bin when it is installed next to this SDK, else `sandbox-agent` on PATH.
 */
export function defaultServerBin(): string {
  const fromEnv = process.env.SANDBOX_AGENT_SERVER_BIN;
  if (fromEnv) return fromEnv;
  try {
    const entry = fileURLToPath(import.meta.resolve("@sandbox-agent/server"));
    const bin = packageBin(entry);
    if (bin) return bin;
  } catch {
    // Not installed: fall through to PATH.
  }
  return "sandbox-agent";
}

/** The `sandbox-agent` bin of the package that contains `file`. */
function packageBin(file: string): string | undefined {
  for (let dir = path.dirname(file); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const manifest = path.join(dir, "package.json");
    if (!existsSync(manifest)) continue;
    const pkg = JSON.parse(readFileSync(manifest, "utf8")) as { bin?: string | Record<string, string> };
    const bin = typeof pkg.bin === "string" ? pkg.bin : pkg.bin?.["sandbox-agent"];
    return bin ? path.join(dir, bin) : undefined;
  }
  return undefined;
}

/** A started server; `stop()` terminates its whole process group. */
export class ServerProcess {
  readonly baseUrl: string;
  readonly token: string;
  private readonly child: ChildProcess;
  private readonly stderr: () => string;
  private stopping: Promise<void> | undefined;

  private constructor(child: ChildProcess, baseUrl: string, token: string, stderr: () => string) {
    this.child = child;
    this.baseUrl = baseUrl;
    this.token = token;
    this.stderr = stderr;
    live.add(this);
    installExitHooks();
    void exited(child).then(() => live.delete(this));
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The last 64 KiB the server wrote on stderr (its log). */
  logs(): string {
    return this.stderr();
  }

  static async start(options: ServerProcessOptions): Promise<ServerProcess> {
    const child = spawnServer(options);
    let tail = "";
    child
      .stderr!.setEncoding("utf8")
      .on("data", (d: string) => (tail = (tail + d).slice(-STDERR_TAIL_CHARS)));
    try {
      const baseUrl = await listeningUrl(child, options.startTimeoutMs, () => tail);
      return new ServerProcess(child, baseUrl, options.token, () => tail);
    } catch (error) {
      killGroup(child, "SIGKILL");
      throw error;
    }
  }

  /** SIGTERM to the process group, SIGKILL after a grace period; resolves once the server exited. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      if (!this.running) return;
      // Keep this process alive until the server is gone, so its shutdown is not cut short.
      this.child.ref();
      const done = exited(this.child);
      killGroup(this.child, "SIGTERM");
      const timer = setTimeout(() => killGroup(this.child, "SIGKILL"), KILL_GRACE_MS);
      await done;
      clearTimeout(timer);
    })();
    return this.stopping;
  }

  /**
   * Last resort when this process exits (synchronous). SIGTERM, not SIGKILL: the server outlives us
   * for a moment and stops its agents, which run in process groups of their own.
   */
  kill(): void {
    if (this.running) killGroup(this.child, "SIGTERM");
  }
}

/**
 * The server's environment, with `NODE_EXTRA_CA_CERTS` moved to `SANDBOX_AGENT_NODE_EXTRA_CA_CERTS`:
 * Node parses that PEM bundle while it starts (on a machine whose environment names the system
 * bundle, ~55 ms of CPU and ~1.7 MiB, about half of the server's start), and the server makes no TLS
 * connection itself. It gives the variable back to the processes it starts (npm, agents).
 */
function serverEnvironment(env: Record<string, string | undefined>): Record<string, string | undefined> {
  const { NODE_EXTRA_CA_CERTS: extraCaCerts, ...rest } = env;
  return extraCaCerts === undefined ? env : { ...rest, SANDBOX_AGENT_NODE_EXTRA_CA_CERTS: extraCaCerts };
}

function spawnServer(options: ServerProcessOptions): ChildProcess {
  const script = /\.[cm]?js$/.test(options.serverBin);
  const command = script ? process.execPath : options.serverBin;
  const args = [
    ...(script ? [options.serverBin] : []),
    "server",
    "--host",
    "127.0.0.1",
    "--port",
    "0",
    ...options.args,
  ];
  const child = spawn(command, args, {
    // The token goes through the environment so it does not show in process listings.
    env: serverEnvironment({ ...process.env, ...options.env, SANDBOX_AGENT_TOKEN: options.token }),
    stdio: ["ignore", "pipe", "pipe"],
    // Own process group: stop() can signal the server and anything it left behind.
    detached: true,
  });
  // A forgotten dispose() must not keep the parent alive; exit hooks still kill the server.
  child.unref();
  return child;
}

function listeningUrl(child: ChildProcess, timeoutMs: number, stderr: () => string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let stdout = "";
    const fail = (message: string): void => {
      cleanup();
      reject(new Error(`sandbox-agent server ${message}\n${stderr().slice(-4000)}`));
    };
    const timer = setTimeout(() => fail(`did not start within ${timeoutMs} ms`), timeoutMs);
    const onData = (data: string): void => {
      stdout += data;
      const match = LISTENING.exec(stdout);
      if (!match) return;
      cleanup();
      resolve(match[1]!);
    };
    const onExit = (code: number | null, signal: string | null): void =>
      fail(`exited (${signal ?? `code ${code}`}) before listening`);
    const onError = (error: Error): void => fail(`could not be spawned: ${error.message}`);
    function cleanup(): void {
      clearTimeout(timer);
      child.stdout!.off("data", onData);
      child.off("exit", onExit);
      child.off("error", onError);
      // Keep draining so the server never blocks on a full pipe, without holding the loop open.
      child.stdout!.resume();
      unrefStream(child.stdout);
      unrefStream(child.stderr);
    }
    child.stdout!.setEncoding("utf8").on("data", onData);
    child.once("exit", onExit);
    child.once("error", onError);
  });
}

function unrefStream(stream: unknown): void {
  (stream as { unref?: () => void } | null)?.unref?.();
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    try {
      child.kill(signal);
    } catch {
      // already gone
    }
  }
}

// ---- cleanup on process exit ---------------------------------------------------------------

const live = new Set<ServerProcess>();
let hooksInstalled = false;
const SIGNALS: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];

function killAll(): void {
  for (const server of live) server.kill();
}

/** Kills live servers when this process exits, also by a signal, without changing how it exits. */
function installExitHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.once("exit", killAll);
  for (const signal of SIGNALS) {
    const onSignal = (): void => {
      killAll();
      process.off(signal, onSignal);
      // Only re-raise when nobody else handles the signal: then the default action (exit) applies.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}
