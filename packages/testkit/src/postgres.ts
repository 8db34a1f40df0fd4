import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  chownSync,
  existsSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { freePort } from "./ports.js";
import path from "node:path";
import { tempDir } from "./temp.js";

/** A throwaway PostgreSQL server of this test run: its own data directory, a free loopback port. */
export interface PostgresCluster {
  /** `postgresql://postgres:<password>@127.0.0.1:<port>/postgres` */
  readonly connectionString: string;
  readonly port: number;
  /** The postmaster's pid (to check that nothing is left behind). */
  readonly pid: number;
  /** Everything the server logged so far. */
  logs(): string;
  /** Stops the server (fast shutdown) and removes its directory. Safe to call twice. */
  stop(): Promise<void>;
}

export interface StartPostgresOptions {
  /** Server settings (`-c name=value`), over the test defaults (`fsync=off`…: nothing here needs to survive a power cut). */
  settings?: Record<string, string>;
  timeoutMs?: number;
}

const TEST_SETTINGS: Record<string, string> = {
  fsync: "off",
  synchronous_commit: "off",
  full_page_writes: "off",
  // No Unix socket: the default directory (/var/run/postgresql) may not exist or be writable.
  unix_socket_directories: "",
};

interface Binaries {
  initdb: string;
  postgres: string;
}

/** The directory holding `initdb` and `postgres`: PATH first, then Debian's versioned directories. */
function findBinaries(): Binaries | undefined {
  const dirs = (process.env.PATH ?? "").split(path.delimiter).filter(Boolean);
  const debian = "/usr/lib/postgresql";
  if (existsSync(debian)) {
    const versions = readdirSync(debian).sort((a, b) => Number(b) - Number(a));
    dirs.push(...versions.map((v) => path.join(debian, v, "bin")));
  }
  for (const dir of dirs) {
    const initdb = path.join(dir, "initdb");
    if (!existsSync(initdb)) continue;
    // `initdb` on PATH is often a symlink; `postgres` sits beside the real one.
    const real = path.dirname(realpathSync(initdb));
    const postgres = path.join(real, "postgres");
    if (existsSync(postgres)) return { initdb: path.join(real, "initdb"), postgres };
  }
  return undefined;
}

interface RunAs {
  uid: number;
  gid: number;
  name: string;
}

/** PostgreSQL refuses to run as root: as root we run it as the `postgres` system user the Debian package creates. */
function runAsUser(): RunAs | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string): number =>
    Number(spawnSync("id", [flag, "postgres"], { encoding: "utf8" }).stdout);
  const uid = id("-u");
  return Number.isInteger(uid) && uid > 0 ? { uid, gid: id("-g"), name: "postgres" } : undefined;
}

/**
 * Why a scratch cluster cannot start here, with how to fix it; undefined when it can.
 * Use as `describe(name, { skip: needService("postgresql", postgresMissing()) }, …)`.
 */
export function postgresMissing(): string | undefined {
  if (findBinaries() === undefined) {
    return "initdb/postgres not found on PATH nor in /usr/lib/postgresql/*/bin (Debian: apt-get install postgresql)";
  }
  if (process.getuid?.() === 0 && runAsUser() === undefined) {
    return "running as root and there is no `postgres` system user to run PostgreSQL as (Debian: apt-get install postgresql)";
  }
  return undefined;
}

/** Runs `argv` as `user` (root only), else as ourselves. */
function command(argv: string[], user: RunAs | undefined): [string, string[]] {
  return user ? ["runuser", ["-u", user.name, "--", ...argv]] : [argv[0]!, argv.slice(1)];
}

/**
 * The server runs under a shell that waits on its stdin, a pipe from this process: when this process
 * exits in any way (even SIGKILL) the pipe closes and the shell stops the server. So no test run can
 * leave a database process behind.
 */
const GUARD = '"$@" & pg=$!; read -r _; kill -INT "$pg" 2>/dev/null; wait "$pg"';

/**
 * Starts a scratch PostgreSQL server: `initdb` in a fresh temp directory (password auth with a random
 * password), then `postgres` on 127.0.0.1 and a free port; resolves once it accepts connections.
 */
export async function startPostgres(options: StartPostgresOptions = {}): Promise<PostgresCluster> {
  const missing = postgresMissing();
  if (missing !== undefined) throw new Error(`cannot start PostgreSQL: ${missing}`);
  const bins = findBinaries()!;
  const user = runAsUser();
  const dir = tempDir("sandbox-agent-pg-");
  const data = path.join(dir, "data");
  if (user) chownSync(dir, user.uid, user.gid);
  const password = randomBytes(18).toString("base64url");
  try {
    initCluster(bins, user, dir, data, password);
    const port = await freePort();
    return await launch(bins, user, dir, data, port, password, options);
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

function initCluster(
  bins: Binaries,
  user: RunAs | undefined,
  dir: string,
  data: string,
  password: string,
): void {
  const pwfile = path.join(dir, "password");
  writeFileSync(pwfile, password, { mode: 0o600 });
  if (user) chownSync(pwfile, user.uid, user.gid);
  const argv = [bins.initdb, "-D", data, "-U", "postgres", `--pwfile=${pwfile}`, "--auth=scram-sha-256"];
  argv.push("-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions");
  const [cmd, args] = command(argv, user);
  const result = spawnSync(cmd, args, { encoding: "utf8" });
  rmSync(pwfile, { force: true });
  if (result.status !== 0)
    throw new Error(`initdb failed (${result.status}):\n${result.stderr}${result.stdout}`);
}

async function launch(
  bins: Binaries,
  user: RunAs | undefined,
  dir: string,
  data: string,
  port: number,
  password: string,
  options: StartPostgresOptions,
): Promise<PostgresCluster> {
  const settings = { ...TEST_SETTINGS, ...options.settings };
  const argv = ["sh", "-c", GUARD, "sh", bins.postgres, "-D", data, "-h", "127.0.0.1", "-p", String(port)];
  for (const [name, value] of Object.entries(settings)) argv.push("-c", `${name}=${value}`);
  const [cmd, args] = command(argv, user);
  const child = spawn(cmd, args, { stdio: ["pipe", "ignore", "pipe"] });
  let log = "";
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    log = (log + chunk).slice(-64 * 1024);
  });
  await waitReady(child, () => log, options.timeoutMs ?? 30_000);
  const pid = Number(readFileSync(path.join(data, "postmaster.pid"), "utf8").split("\n")[0]);
  let stopped: Promise<void> | undefined;
  return {
    connectionString: `postgresql://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    port,
    pid,
    logs: () => log,
    stop: () => (stopped ??= shutdown(child, pid, dir)),
  };
}

function waitReady(child: ChildProcess, log: () => string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (error?: Error): void => {
      clearTimeout(timer);
      child.stderr!.off("data", check);
      child.off("exit", exited);
      if (error) {
        child.stdin!.end();
        reject(error);
      } else resolve();
    };
    const check = (): void => {
      if (log().includes("database system is ready to accept connections")) done();
    };
    const exited = (code: number | null): void =>
      done(new Error(`postgres exited with ${code} before accepting connections:\n${log()}`));
    const timer = setTimeout(
      () => done(new Error(`postgres did not accept connections within ${timeoutMs} ms:\n${log()}`)),
      timeoutMs,
    );
    child.stderr!.on("data", check);
    child.once("exit", exited);
    check();
  });
}

async function shutdown(child: ChildProcess, pid: number, dir: string): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.stdin!.end();
    const timer = setTimeout(() => {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }, 10_000);
    await exited;
    clearTimeout(timer);
  }
  rmSync(dir, { recursive: true, force: true });
}
