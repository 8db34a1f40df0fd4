import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { serverBin } from "./paths.js";
import { tempDir } from "./temp.js";

export interface StartServerOptions {
  /** The server entry run with `node` (default: this repository's `sandbox-agent` bin). */
  bin?: string;
  /** Extra CLI arguments after `server`. */
  args?: string[];
  /** Written to a temp file and passed with `--config`. */
  config?: unknown;
  token?: string;
  env?: Record<string, string | undefined>;
  timeoutMs?: number;
  /**
   * A command line to run the server through (e.g. into a namespace), given `node <server> …` as
   * its last arguments. It must end up exec'ing them, so that the child's pid is the server's.
   */
  wrapper?: string[];
  /** Runs the server under `ulimit -n` of this many descriptors (soft and hard limit). */
  nofile?: number;
}

export interface RunningServer {
  baseUrl: string;
  port: number;
  token: string | undefined;
  dataDir: string;
  process: ChildProcess;
  /** Everything the server printed on stderr so far. */
  logs(): string;
  /** Headers with the bearer token, if any. */
  headers(extra?: Record<string, string>): Record<string, string>;
  stop(): Promise<void>;
}

/** Starts the real server CLI as a child process on a free loopback port and waits for it to listen. */
export async function startServer(options: StartServerOptions = {}): Promise<RunningServer> {
  const dataDir = tempDir("sandbox-agent-data-");
  const args = [options.bin ?? serverBin, "server", "--port", "0", ...(options.args ?? [])];
  if (options.token) args.push("--token", options.token);
  if (options.config !== undefined) {
    const file = path.join(dataDir, "config.json");
    writeFileSync(file, JSON.stringify(options.config));
    args.push("--config", file);
  }
  // `exec` keeps the pid: the shell becomes the server (or the wrapper, which must exec it in turn).
  const nofile =
    options.nofile === undefined ? [] : ["/bin/sh", "-c", `ulimit -n ${options.nofile} && exec "$0" "$@"`];
  const [command, ...commandArgs] = [...nofile, ...(options.wrapper ?? []), process.execPath, ...args];
  const child = spawn(command!, commandArgs, {
    env: { ...process.env, SANDBOX_AGENT_DATA_DIR: dataDir, ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const baseUrl = await new Promise<string>((resolve, reject) => {
    let stdout = "";
    const timer = setTimeout(
      () => reject(new Error(`server did not start:\n${stderr}`)),
      options.timeoutMs ?? 10_000,
    );
    child.stdout!.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
      const m = /listening on (http:\/\/\S+)/.exec(stdout);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${stderr}`));
    });
  });
  const port = Number(new URL(baseUrl).port);
  return {
    baseUrl,
    port,
    token: options.token,
    dataDir,
    process: child,
    logs: () => stderr,
    headers: (extra = {}) => ({
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
      ...extra,
    }),
    stop: () => stopChild(child),
  };
}

/** SIGTERM, then SIGKILL after 3 s; resolves once the process has exited. */
export function stopChild(child: ChildProcess): Promise<void> {
  return new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
    setTimeout(() => child.kill("SIGKILL"), 3000).unref();
  });
}
