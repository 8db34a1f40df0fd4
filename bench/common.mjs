// Helpers shared by the benchmarks.
import { execFileSync, spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { serverBin, tempDir } from "@sandbox-agent/testkit";

/** User and system CPU time of a process so far, in ms (Linux clock ticks are 10 ms). */
export const cpuSplitMs = (pid) => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return { user: Number(fields[11]) * 10, system: Number(fields[12]) * 10 };
};

/** User + system CPU time of a process so far, in ms. */
export const cpuMs = (pid) => {
  const { user, system } = cpuSplitMs(pid);
  return user + system;
};

/** The middle value of `values` (the mean of the two middle ones for an even count). */
export const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** The `p`th percentile of `values`. */
export const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};

/** An error in how the bench was called or set up: `runMain` prints its message alone, no stack. */
export class UsageError extends Error {}

/** A bench's help text: the `//` comment block at the top of its script. */
function helpOf(scriptUrl) {
  const lines = readFileSync(fileURLToPath(scriptUrl), "utf8").split("\n");
  const header = lines.slice(lines[0].startsWith("#!") ? 1 : 0);
  const end = header.findIndex((line) => !line.startsWith("//"));
  return header
    .slice(0, end === -1 ? header.length : end)
    .map((line) => line.replace(/^\/\/ ?/, ""))
    .join("\n");
}

/**
 * The bench's options, parsed strictly with node:util's `parseArgs` from `options` (`--help`/`-h`
 * and `--json` are always there). `--help` prints the script's header comment and exits 0; an
 * unknown or malformed option says so and exits 2. The value of a string option may start with a
 * dash (`--server-args "--max-semi-space-size=4"` passes node options), which `parseArgs` alone
 * would refuse as ambiguous.
 */
export function benchArgs(scriptUrl, options = {}) {
  const all = { help: { type: "boolean", short: "h" }, json: { type: "boolean" }, ...options };
  const args = [];
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const option = all[argv[i].slice(2)];
    const joined = argv[i].startsWith("--") && option?.type === "string" && i + 1 < argv.length;
    args.push(joined ? `${argv[i]}=${argv[++i]}` : argv[i]);
  }
  let values;
  try {
    ({ values } = parseArgs({ args, options: all, strict: true }));
  } catch (error) {
    usageFail(scriptUrl, error.message);
  }
  if (values.help) {
    console.log(helpOf(scriptUrl));
    process.exit(0);
  }
  return values;
}

/** Says what is wrong with the bench's command line, where to read its usage, and exits 2. */
export function usageFail(scriptUrl, message) {
  const name = path.basename(fileURLToPath(scriptUrl));
  console.error(`${name}: ${message}\nSee: node bench/${name} --help`);
  process.exit(2);
}

/** The node options in `--server-args "ARGS"` (split at spaces) for the servers a bench starts. */
export const splitNodeArgs = (serverArgs) => (serverArgs ?? "").split(" ").filter(Boolean);

let bundleChecked = false;

/**
 * Makes the server bundle current (`scripts/bundle.mjs --if-stale`, as `npm start` does) before the
 * first server starts: with a stale bundle the `sandbox-agent` command runs the compiled modules
 * instead, which start slower and take more memory, so a bench would measure what nobody ships.
 */
function ensureBundle() {
  if (bundleChecked) return;
  bundleChecked = true;
  const script = fileURLToPath(new URL("../packages/server/scripts/bundle.mjs", import.meta.url));
  execFileSync(process.execPath, [script, "--if-stale"], { stdio: ["ignore", 2, 2] });
}

/**
 * Starts the server CLI on a free port and waits for `/v2/health`; `startMs` is spawn → healthy.
 * `nodeArgs` go to node itself (before the CLI).
 */
export async function startServer(extraArgs = [], configJson, nodeArgs = []) {
  ensureBundle();
  const args = [...nodeArgs, serverBin, "server", "--port", "0", "--log-level", "warn", ...extraArgs];
  if (configJson) {
    const file = `${tempDir()}/config.json`;
    writeFileSync(file, JSON.stringify(configJson));
    args.push("--config", file);
  }
  return startNode(args, { ...process.env, SANDBOX_AGENT_DATA_DIR: tempDir() });
}

/**
 * Spawns `node ARGS`, waits for its "listening on URL" line on stdout, then for a 200 on
 * `/v2/health`; `startMs` is spawn → healthy, `listenMs` spawn → the "listening" line.
 */
export async function startNode(args, env = process.env) {
  const started = performance.now();
  let listenMs;
  const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"], env });
  const url = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d) => {
      out += d;
      const m = /listening on (\S+)/.exec(out);
      if (m) {
        listenMs ??= performance.now() - started;
        resolve(m[1]);
      }
    });
    child.once("exit", (code) => reject(new Error(`server exited ${code}`)));
  });
  await untilHealthy(`${url}/v2/health`);
  return { url, child, startMs: performance.now() - started, listenMs, stop: () => child.kill("SIGTERM") };
}

/** Keep-alive sockets for the benches' HTTP clients (many connections, each with its SSE stream). */
export const keepAliveAgent = new http.Agent({ keepAlive: true, maxSockets: 256 });

/** One HTTP request on the shared keep-alive agent; resolves with its status, headers and text body. */
export function request(url, method, headers, body, signal) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers, agent: keepAliveAgent, signal }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (d) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** Resolves once `healthUrl` answers 200 (connection errors are retried). */
export async function untilHealthy(healthUrl) {
  for (;;) {
    const ok = await fetch(healthUrl).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
  }
}

/** Runs a benchmark's `main` and exits (servers and agents it started may still be stopping). */
export function runMain(main) {
  main().then(
    () => process.exit(0),
    (error) => {
      if (error instanceof UsageError) {
        console.error(error.message);
        process.exit(2);
      }
      console.error(error);
      process.exit(1);
    },
  );
}

/**
 * A minimal SSE splitter for exactly the blocks our server writes (`id:`, `event:`, `data:` lines):
 * returns `feed(text)`, which calls `onEvent(event, data)` per block that has data.
 */
export function sseSplitter(onEvent) {
  let buffer = "";
  return (text) => {
    buffer += text;
    let end;
    while ((end = buffer.indexOf("\n\n")) !== -1) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const at = block.indexOf("data: ");
      if (at === -1 || at + 6 >= block.length) continue;
      // Header lines come before `data:`: look back from it only (run.mjs streams 200,000 events).
      const e = block.lastIndexOf("event: ", at);
      const event = e === -1 ? undefined : block.slice(e + 7, block.indexOf("\n", e));
      onEvent(event, block.slice(at + 6));
    }
  };
}

/**
 * One `/v2/rpc` connection of our server (or the floor) with its SSE stream open: `call(method,
 * params)` POSTs a request and resolves with its answer from the stream; `onUpdate` (settable) gets
 * each `session/update`; `close()` ends the stream and DELETEs the connection.
 */
export async function rpcConnection(base) {
  const url = `${base}/v2/rpc`;
  const json = { "content-type": "application/json", accept: "application/json" };
  const params = {
    protocolVersion: 1,
    clientCapabilities: {},
    _meta: { "sandboxagent.dev": { agent: "mock" } },
  };
  const init = await request(
    url,
    "POST",
    json,
    JSON.stringify({ jsonrpc: "2.0", id: 0, method: "initialize", params }),
  );
  if (init.status !== 200) throw new Error(`initialize: ${init.status} ${init.text}`);
  const headers = { ...json, "acp-connection-id": init.headers["acp-connection-id"] };
  const pending = new Map();
  const conn = { onUpdate: () => {}, nextId: 1 };
  const sse = await new Promise((resolve, reject) => {
    const sseHeaders = { accept: "text/event-stream", "acp-connection-id": headers["acp-connection-id"] };
    http
      .get(url, { headers: sseHeaders, agent: keepAliveAgent }, (res) => {
        const feed = sseSplitter((_event, data) => {
          const message = JSON.parse(data);
          if (message.method === "session/update") return conn.onUpdate(message);
          pending.get(message.id)?.(message);
          pending.delete(message.id);
        });
        res.setEncoding("utf8").on("data", feed);
        resolve(res);
      })
      .on("error", reject);
  });
  conn.call = async (method, params) => {
    const id = conn.nextId++;
    const answered = new Promise((resolve) => pending.set(id, resolve));
    const res = await request(url, "POST", headers, JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    if (res.status !== 202) throw new Error(`${method}: ${res.status} ${res.text}`);
    return answered;
  };
  conn.close = async () => {
    sse.destroy();
    await request(url, "DELETE", headers).catch(() => undefined);
  };
  return conn;
}
