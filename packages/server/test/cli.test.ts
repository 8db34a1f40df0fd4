import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import { freePort, serverBin, startServer, stopChild, tempDir, waitFor } from "@sandbox-agent/testkit";

/** The environment of a CLI run: this one without any SANDBOX_AGENT_* setting, plus `env`. */
function cliEnv(env: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith("SANDBOX_AGENT_")),
  );
  return { ...clean, SANDBOX_AGENT_DATA_DIR: tempDir("cli-data-"), ...env };
}

/** Runs the CLI to completion. */
function cli(args: string[], env: Record<string, string | undefined> = {}) {
  return spawnSync(process.execPath, [serverBin, ...args], {
    encoding: "utf8",
    env: cliEnv(env),
    timeout: 30_000,
  });
}

/** A stack trace in CLI output: the user gets one line, not this. */
const STACK = /^\s+at /m;

/** Starts `server` with exactly `args` and `env` (no --port added) and resolves with what it printed once listening. */
async function serve(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, [serverBin, "server", ...args], {
    env: cliEnv(env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`server did not start: ${stdout}${stderr}`));
    }, 20_000);
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
      if (/workdir .*\n/.test(stdout)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited ${code}: ${stderr}`));
    });
  });
  const url = /listening on (http:\/\/\S+)/.exec(stdout)![1]!;
  return { url, stdout, stop: () => stopChild(child), stderr: () => stderr };
}

async function health(url: string, token?: string): Promise<{ status: number; workdir?: string }> {
  const response = await fetch(`${url}/v2/health`, {
    headers: token ? { authorization: `Bearer ${token}` } : {},
  });
  const body = response.status === 200 ? ((await response.json()) as { workdir: string }) : undefined;
  return { status: response.status, ...(body ? { workdir: body.workdir } : {}) };
}

describe("CLI conventions", () => {
  it("--help and --version exit 0; an unknown flag or command exits 2", () => {
    assert.match(cli(["--help"]).stdout, /Usage:/);
    assert.match(cli(["--version"]).stdout, /^\d+\.\d+\.\d+/);
    assert.equal(cli(["server", "--bogus"]).status, 2);
    assert.equal(cli(["frobnicate"]).status, 2);
  });

  it("every subcommand has its own --help, exit 0", () => {
    for (const [args, title] of [
      [["server", "--help"], /Usage: sandbox-agent server/],
      [["install-agent", "--help"], /Usage: sandbox-agent install-agent ID/],
      [["install-agent", "-h"], /Usage: sandbox-agent install-agent ID/],
      [["agents", "--help"], /Usage: sandbox-agent agents/],
      [["help", "agents"], /Usage: sandbox-agent agents/],
    ] as const) {
      const run = cli([...args]);
      assert.equal(run.status, 0, `${args.join(" ")}: ${run.stderr}`);
      assert.match(run.stdout, title);
    }
  });

  it("a reader that stops reading (`agents | head`) ends the command quietly", async () => {
    const child = spawn(process.execPath, [serverBin, "agents", "--json"], {
      env: cliEnv(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout.destroy(); // the reader is gone before the command writes
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
    assert.equal(code, 0, stderr);
    assert.equal(stderr, "");
  });

  it("a port in use is one line saying what to do, exit 1", async () => {
    const other = await startServer();
    try {
      const run = cli(["server", "--port", String(other.port)]);
      assert.equal(run.status, 1);
      assert.doesNotMatch(run.stderr, STACK);
      assert.equal(run.stderr.trim().split("\n").length, 1, run.stderr);
      assert.match(run.stderr, /in use.*--port/);
    } finally {
      await other.stop();
    }
  });

  it("refuses an empty token from a flag or the environment (it would mean no authentication)", () => {
    for (const [args, env] of [
      [["--token="], {}],
      [["-t", ""], {}],
      [[], { SANDBOX_AGENT_TOKEN: "" }],
    ] as const) {
      const run = cli(["server", "--port", "0", ...args], env);
      assert.equal(run.status, 2, `${args.join(" ")} ${JSON.stringify(env)}`);
      assert.match(run.stderr, /empty/);
    }
  });

  it("refuses a port or young-generation size that is no whole number in range, saying what is valid, exit 2", () => {
    for (const [args, env, valid] of [
      [["--port", "70000"], {}, /--port 70000 is not a port \(0 to 65535/],
      [[], { SANDBOX_AGENT_PORT: "abc" }, /SANDBOX_AGENT_PORT abc is not a port/],
      [["--young-generation-mib=-1"], {}, /-1 is not a size in MiB/],
      [
        [],
        { SANDBOX_AGENT_YOUNG_GENERATION_MIB: "1.5" },
        /SANDBOX_AGENT_YOUNG_GENERATION_MIB 1\.5 is not a size in MiB/,
      ],
    ] as const) {
      const run = cli(["server", ...args], env);
      assert.equal(run.status, 2, `${args.join(" ")} ${JSON.stringify(env)}: ${run.stderr}`);
      assert.match(run.stderr, valid);
    }
  });

  it("refuses a non-loopback bind without a token, with exit code 2", () => {
    const run = cli(["server", "--host", "0.0.0.0", "--port", "0"]);
    assert.equal(run.status, 2);
    assert.match(run.stderr, /without a token/);
  });

  it("a missing --workdir or --fs-root is a usage error at start, naming where it came from", () => {
    const missing = path.join(tempDir(), "nope");
    for (const [args, env, name] of [
      [["--workdir", missing], {}, /--workdir .*nope does not exist/],
      [["--fs-root", missing], {}, /--fs-root .*nope does not exist/],
      [[], { SANDBOX_AGENT_WORKDIR: missing }, /\$SANDBOX_AGENT_WORKDIR .*nope does not exist/],
    ] as const) {
      const run = cli(["server", "--port", "0", ...args], env);
      assert.equal(run.status, 2);
      assert.match(run.stderr, name);
      assert.doesNotMatch(run.stderr, STACK);
    }
  });

  it("rejects a config file with unknown keys, and a missing one, with exit code 2", () => {
    const file = path.join(tempDir(), "config.json");
    writeFileSync(file, JSON.stringify({ agents: { a: { command: "x", arg: [] } } }));
    const bad = cli(["server", "--port", "0", "--config", file]);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /agents\.a.*arg/s);
    const missing = cli(["server", "--port", "0", "--config", "/nope.json"]);
    assert.equal(missing.status, 2);
    assert.match(missing.stderr, /Cannot read config file/);
    writeFileSync(file, JSON.stringify({ agents: { nobody: { clientEnv: ["X"] } } }));
    const noCommand = cli(["server", "--port", "0", "--config", file]);
    assert.equal(noCommand.status, 2);
    assert.match(noCommand.stderr, /"nobody" has no "command"/);
  });

  it("install-agent --json answers usage errors in JSON too", () => {
    const run = cli(["install-agent", "no-such-agent", "--json"]);
    assert.equal(run.status, 2);
    const problem = JSON.parse(run.stdout) as { type: string; detail: string };
    assert.equal(problem.type, "usage-error");
    assert.match(problem.detail, /unknown agent "no-such-agent"/);
    assert.equal(
      (JSON.parse(cli(["install-agent", "--json"]).stdout) as { type: string }).type,
      "usage-error",
    );
  });
});

describe("server settings: flag > environment > config file > default", () => {
  it("the default workdir is <data-dir>/workspace, created and said at start", async () => {
    const dataDir = tempDir("cli-default-");
    const server = await serve(["--port", "0"], { SANDBOX_AGENT_DATA_DIR: dataDir });
    try {
      const workdir = path.join(dataDir, "workspace");
      assert.ok(existsSync(workdir));
      assert.match(server.stdout, new RegExp(`workdir ${workdir}\\n`));
      assert.equal((await health(server.url)).workdir, workdir);
    } finally {
      await server.stop();
    }
  });

  it("short flags set host, port, token, workdir, data dir and log level", async () => {
    const [port, workdir, dataDir] = [await freePort(), tempDir("cli-w-"), tempDir("cli-d-")];
    const server = await serve(
      [
        "-H",
        "127.0.0.1",
        "-p",
        String(port),
        "-t",
        "short-token",
        "-w",
        workdir,
        "-d",
        dataDir,
        "-l",
        "debug",
      ],
      {},
    );
    try {
      assert.equal(server.url, `http://127.0.0.1:${port}`);
      assert.equal((await health(server.url)).status, 401);
      assert.equal((await health(server.url, "short-token")).workdir, workdir);
      await waitFor(() => / debug request /.test(server.stderr()), 5000, "a debug access log line");
      // The log file is opened with its first line.
      const logFile = path.join(dataDir, "logs", "server.log");
      await waitFor(
        () => existsSync(logFile) && / debug request /.test(readFileSync(logFile, "utf8")),
        5000,
        "the line in the log file",
      );
    } finally {
      await server.stop();
    }
  });

  it("environment variables set what flags set; a flag wins over the environment", async () => {
    const [port, workdir, flagWorkdir] = [await freePort(), tempDir("cli-env-w-"), tempDir("cli-flag-w-")];
    const env = {
      SANDBOX_AGENT_PORT: String(port),
      SANDBOX_AGENT_HOST: "127.0.0.1",
      SANDBOX_AGENT_TOKEN: "env-token",
      SANDBOX_AGENT_WORKDIR: workdir,
      SANDBOX_AGENT_LOG_FORMAT: "json",
      SANDBOX_AGENT_DEFAULT_AGENT: "mock",
    };
    const fromEnv = await serve([], env);
    try {
      assert.equal(fromEnv.url, `http://127.0.0.1:${port}`);
      assert.equal((await health(fromEnv.url, "env-token")).workdir, workdir);
      const initialize = await fetch(`${fromEnv.url}/v2/rpc`, {
        method: "POST",
        headers: { authorization: "Bearer env-token", "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: 1 } }),
      });
      assert.equal(initialize.status, 200, "the default agent from the environment answered");
      const line = fromEnv
        .stderr()
        .split("\n")
        .find((l) => l.includes('"connection opened"'));
      assert.equal((JSON.parse(line!) as { agent: string }).agent, "mock");
    } finally {
      await fromEnv.stop();
    }
    const fromFlags = await serve(["--port", "0", "--workdir", flagWorkdir, "--no-token"], env);
    try {
      assert.notEqual(fromFlags.url, `http://127.0.0.1:${port}`);
      assert.equal(
        (await health(fromFlags.url)).workdir,
        flagWorkdir,
        "--no-token beat $SANDBOX_AGENT_TOKEN",
      );
    } finally {
      await fromFlags.stop();
    }
  });

  it("config keys set what flags set, below the environment; relative paths are the config file's", async () => {
    const dir = tempDir("cli-config-");
    mkdirSync(path.join(dir, "work"));
    mkdirSync(path.join(dir, "other"));
    const file = path.join(dir, "config.json");
    const port = await freePort();
    writeFileSync(
      file,
      JSON.stringify({ port, host: "127.0.0.1", token: "config-token", workdir: "work", logLevel: "error" }),
    );
    chmodSync(file, 0o600);
    const viaEnv = await serve([], { SANDBOX_AGENT_CONFIG: file });
    try {
      assert.equal(viaEnv.url, `http://127.0.0.1:${port}`);
      assert.equal((await health(viaEnv.url)).status, 401);
      assert.equal((await health(viaEnv.url, "config-token")).workdir, path.join(dir, "work"));
    } finally {
      await viaEnv.stop();
    }
    const overridden = await serve(["-c", file, "-p", "0"], {
      SANDBOX_AGENT_WORKDIR: path.join(dir, "other"),
      SANDBOX_AGENT_TOKEN: "env-token",
    });
    try {
      assert.equal((await health(overridden.url, "env-token")).workdir, path.join(dir, "other"));
    } finally {
      await overridden.stop();
    }
  });
});

describe("install-agent progress", () => {
  /**
   * A stand-in for npm (`$SANDBOX_AGENT_NPM`): prints request lines as `npm --loglevel=http`
   * does and writes the package's manifest where npm would.
   */
  function fakeNpm(): string {
    const file = path.join(tempDir("fake-npm-"), "npm.mjs");
    writeFileSync(
      file,
      `#!${process.execPath}
import { mkdirSync, writeFileSync } from "node:fs";
const spec = process.argv.at(-1);
const at = spec.lastIndexOf("@");
const [name, version] = [spec.slice(0, at), spec.slice(at + 1)];
for (const p of [name, "zod", "ws"])
  process.stderr.write(\`npm http fetch GET 200 https://registry.npmjs.org/\${encodeURIComponent(p)} 5ms (cache miss)\\n\`);
if (process.env.NODE_EXTRA_CA_CERTS) process.stderr.write(\`NODE_EXTRA_CA_CERTS=\${process.env.NODE_EXTRA_CA_CERTS}\\n\`);
mkdirSync(\`node_modules/\${name}\`, { recursive: true });
writeFileSync(\`node_modules/\${name}/package.json\`, JSON.stringify({ name, version }));
`,
    );
    chmodSync(file, 0o755);
    return file;
  }

  it("plain lines when stderr is not a terminal, and a summary at the end", () => {
    const run = cli(["install-agent", "sdk-example"], { SANDBOX_AGENT_NPM: fakeNpm() });
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stderr, /^npm http fetch GET 200 .*ws 5ms/m);
    assert.doesNotMatch(run.stderr, /\r/);
    assert.match(
      run.stdout,
      /^sdk-example 1\.9\.0 installed in \d+\.\d s \(1 package, 3 registry requests\)$/m,
    );
  });

  it("gives npm back NODE_EXTRA_CA_CERTS that a launcher moved to SANDBOX_AGENT_NODE_EXTRA_CA_CERTS", () => {
    const ca = path.join(tempDir("cli-ca-"), "extra-ca.pem");
    const run = cli(["install-agent", "sdk-example"], {
      SANDBOX_AGENT_NPM: fakeNpm(),
      NODE_EXTRA_CA_CERTS: undefined,
      SANDBOX_AGENT_NODE_EXTRA_CA_CERTS: ca,
    });
    assert.equal(run.status, 0, run.stderr);
    assert.ok(run.stderr.includes(`NODE_EXTRA_CA_CERTS=${ca}\n`), run.stderr);
  });

  it(
    "one progress line rewritten in place on a terminal",
    {
      skip: spawnSync("script", ["--version"]).status === 0 ? false : "script(1) from util-linux is missing",
    },
    () => {
      const dataDir = tempDir("cli-tty-");
      // script(1) gives the command a terminal for stdout and stderr.
      const command = [process.execPath, serverBin, "install-agent", "sdk-example"].join(" ");
      const run = spawnSync("script", ["-qfec", command, "/dev/null"], {
        encoding: "utf8",
        env: cliEnv({ SANDBOX_AGENT_NPM: fakeNpm(), SANDBOX_AGENT_DATA_DIR: dataDir }),
        timeout: 30_000,
      });
      assert.equal(run.status, 0, run.stdout);
      assert.ok(
        run.stdout.includes("\r\u001b[Kinstalling sdk-example: 3 registry requests (ws)"),
        run.stdout,
      );
      assert.doesNotMatch(run.stdout, /^npm http/m);
      assert.match(run.stdout, /sdk-example 1\.9\.0 installed in/);
    },
  );
});
