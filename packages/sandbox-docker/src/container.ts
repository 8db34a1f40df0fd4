import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import type Docker from "dockerode";
import type { Engine } from "./engine.js";
import { DockerSandboxError, engineMessage, engineStatus } from "./errors.js";
import {
  LABELS,
  parseMemory,
  SERVER_PORT,
  type DockerSandboxOptions,
  type ServerAddress,
} from "./options.js";
import { DATA_DIR, LAUNCHER } from "./server-bundle.js";

const HEALTH_ATTEMPT_MS = 500;
const HEALTH_POLL_MS = 15;
const STATE_CHECK_MS = 200;
const LOG_TAIL_LINES = 40;
// The PATH a container gets when its image sets none (what Docker and Podman use).
const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

export function isHostNetwork(options: Pick<DockerSandboxOptions, "network">): boolean {
  return options.network === "host";
}

/** Makes sure the image is present (pulling it when allowed); returns its config. */
export async function ensureImage(
  engine: Engine,
  image: string,
  pull: "missing" | "never",
): Promise<Docker.ImageInspectInfo> {
  try {
    return await engine.docker.getImage(image).inspect();
  } catch (error) {
    if (engineStatus(error) !== 404) throw error;
  }
  const howTo =
    "build it (this repository: `npm run image -w @sandbox-agent/sandbox-docker` builds a local test image) " +
    `or pull it (\`docker pull ${image}\`)`;
  if (pull === "never")
    throw new DockerSandboxError("image-missing", `image ${image} is not present: ${howTo}`);
  try {
    const stream = await engine.docker.pull(image);
    await new Promise<void>((resolve, reject) =>
      engine.docker.modem.followProgress(stream, (error) => (error ? reject(error) : resolve())),
    );
    return await engine.docker.getImage(image).inspect();
  } catch (error) {
    throw new DockerSandboxError(
      "image-missing",
      `image ${image} is not present and pulling it failed (${engineMessage(error)}): ${howTo}`,
      { cause: error },
    );
  }
}

/**
 * A port that is free on 127.0.0.1 now, for a server on the host network. The server binds it only
 * once its container has started, so the port is taken from below the kernel's ephemeral range:
 * a port the kernel hands out (to a `listen(0)` or to an outgoing connection's source, such as a
 * readiness poll) could be taken in between (seen with ten sandboxes started at once).
 */
export async function freeLoopbackPort(): Promise<number> {
  const [first] = ephemeralRange();
  const low = Math.min(20_000, first - 1_000);
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = low + Math.floor(Math.random() * (first - low));
    if (await isFree(port)) return port;
  }
  throw new DockerSandboxError(
    "server-failed",
    `no free loopback port found in ${low}-${first - 1} for a host-network sandbox: free some, or use a published port (network other than "host")`,
  );
}

/** The kernel's ephemeral port range (Linux), or its usual default. */
function ephemeralRange(): [number, number] {
  try {
    const [first, last] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8")
      .trim()
      .split(/\s+/)
      .map(Number);
    if (first! > 2_000 && last! >= first!) return [first!, last!];
  } catch {
    // Not Linux: the common default below.
  }
  return [32_768, 60_999];
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(true)));
  });
}

export interface CreateSpec {
  name: string;
  labels: Record<string, string>;
  workdir: string;
  /** Host network only: the loopback port the server binds. */
  hostPort: number | undefined;
}

/** Creates (does not start) the container: init, the server as main process, limits, labels. */
export function createContainer(
  engine: Engine,
  options: DockerSandboxOptions,
  spec: CreateSpec,
): Promise<Docker.Container> {
  const host = isHostNetwork(options);
  const listen = host
    ? ["--host", "127.0.0.1", "--port", String(spec.hostPort)]
    : ["--host", "0.0.0.0", "--port", String(SERVER_PORT)];
  // The server's port, and those the caller's own servers listen on, on 127.0.0.1 only.
  const published = [...new Set([SERVER_PORT, ...(options.ports ?? [])])];
  const mounts = (options.mounts ?? []).map((m) => ({
    Type: m.type ?? (m.source.startsWith("/") ? "bind" : "volume"),
    Source: m.source,
    Target: m.target,
    ReadOnly: m.readOnly ?? false,
  })) as Docker.MountSettings[];
  return engine.docker.createContainer({
    name: spec.name,
    Image: options.image,
    Entrypoint: ["node"],
    Cmd: [LAUNCHER, "server", ...listen, "--workdir", spec.workdir, "--fs-root", "/", "--data-dir", DATA_DIR],
    WorkingDir: spec.workdir,
    Env: Object.entries(options.env ?? {}).map(([name, value]) => `${name}=${value}`),
    Labels: { ...options.labels, ...spec.labels },
    ...(host ? {} : { ExposedPorts: Object.fromEntries(published.map((port) => [`${port}/tcp`, {}])) }),
    HostConfig: {
      Init: true,
      NetworkMode: options.network ?? "bridge",
      ...(host
        ? {}
        : {
            PortBindings: Object.fromEntries(
              published.map((port) => [`${port}/tcp`, [{ HostIp: "127.0.0.1", HostPort: "" }]]),
            ),
          }),
      ...(options.memory !== undefined ? { Memory: parseMemory(options.memory) } : {}),
      ...(options.cpus !== undefined ? { NanoCpus: Math.round(options.cpus * 1e9) } : {}),
      ...(options.pidsLimit !== undefined ? { PidsLimit: options.pidsLimit } : {}),
      ...(options.runtime !== undefined ? { Runtime: options.runtime } : {}),
      ...(mounts.length > 0 ? { Mounts: mounts } : {}),
    },
  });
}

/**
 * Copies `archive` (the server and a fresh token, or only a fresh token for a restart) into a
 * created or stopped container, starts it and waits for its server.
 */
export async function startContainer(
  container: Docker.Container,
  archive: Buffer,
  token: string,
  timeoutMs: number,
): Promise<ServerAddress> {
  await container.putArchive(archive, { path: "/" });
  try {
    await container.start();
  } catch (error) {
    if (engineStatus(error) !== 304) throw startFailure(error, await logTail(container));
  }
  return waitForServer(container, token, timeoutMs);
}

/** The server's address once `/v2/health` answers; a container that stopped fails with its log tail. */
export async function waitForServer(
  container: Docker.Container,
  token: string,
  timeoutMs: number,
  /** The container as inspected since it started (saves a round trip). */
  started?: Docker.ContainerInspectInfo,
): Promise<ServerAddress> {
  const deadline = Date.now() + timeoutMs;
  let info = started ?? (await container.inspect());
  const baseUrl = serverUrl(info);
  let checked = Date.now();
  for (;;) {
    if (await healthy(baseUrl, token)) return { baseUrl, token };
    if (Date.now() - checked > STATE_CHECK_MS) {
      info = await container.inspect();
      checked = Date.now();
      if (!info.State.Running) throw await exitFailure(container, info);
    }
    if (Date.now() > deadline) {
      throw new DockerSandboxError(
        "server-failed",
        `the server in container ${info.Id.slice(0, 12)} did not answer within ${timeoutMs} ms; its log ends:\n${await logTail(container)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, HEALTH_POLL_MS));
  }
}

/** The engine's port proxy may accept before the server listens: each attempt has its own timeout. */
async function healthy(baseUrl: string, token: string): Promise<boolean> {
  try {
    const response = await fetch(`${baseUrl}/v2/health`, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(HEALTH_ATTEMPT_MS),
    });
    await response.body?.cancel();
    return response.ok;
  } catch {
    return false;
  }
}

/**
 * The loopback port that reaches `port` inside the container: the port itself on the host
 * network, else the one the engine published for it.
 */
export async function publishedPort(container: Docker.Container, port: number): Promise<number> {
  const info = await container.inspect();
  if (info.HostConfig.NetworkMode === "host") return port;
  const binding = info.NetworkSettings.Ports?.[`${port}/tcp`]?.find((b) => b.HostPort !== "");
  if (binding === undefined)
    throw new DockerSandboxError(
      "port-not-published",
      `port ${port} of container ${info.Id.slice(0, 12)} is not published: list it in dockerSandbox({ ports: [${port}] }) (or use network: "host")`,
    );
  return Number(binding.HostPort);
}

function serverUrl(info: Docker.ContainerInspectInfo): string {
  const labelled = info.Config.Labels?.[LABELS.port];
  if (labelled !== undefined) return `http://127.0.0.1:${labelled}`;
  const binding = info.NetworkSettings.Ports?.[`${SERVER_PORT}/tcp`]?.find((b) => b.HostPort !== "");
  if (binding === undefined) {
    throw new DockerSandboxError(
      "server-failed",
      `container ${info.Id.slice(0, 12)} has no published port for the server (network mode ${info.HostConfig.NetworkMode})`,
    );
  }
  return `http://127.0.0.1:${binding.HostPort}`;
}

// How engines and inits report that the entrypoint `node` is missing: Docker/runc ("executable
// file not found in $PATH"), an init such as catatonit ("failed to exec pid1"), our launcher.
const NO_NODE =
  /("node"|node:).*(not found|no such file)|executable file not found|failed to exec pid1|too old: the server needs Node/i;

function noNode(why: string): DockerSandboxError {
  return new DockerSandboxError(
    "no-node",
    `the image has no usable Node.js (>= 20 on PATH as \`node\`, which the injected server needs): ${why.trim()}`,
  );
}

function startFailure(error: unknown, logs: string): Error {
  const message = engineMessage(error);
  if (NO_NODE.test(message) || NO_NODE.test(logs)) return noNode(`${message}\n${logs}`);
  return new DockerSandboxError("server-failed", `the container did not start: ${message}\n${logs}`, {
    cause: error,
  });
}

async function exitFailure(container: Docker.Container, info: Docker.ContainerInspectInfo): Promise<Error> {
  const logs = await logTail(container);
  const status = `exited with code ${info.State.ExitCode}${info.State.Error ? ` (${info.State.Error})` : ""}`;
  if (
    info.State.ExitCode === 3 ||
    info.State.ExitCode === 127 ||
    NO_NODE.test(logs) ||
    NO_NODE.test(info.State.Error ?? "") ||
    // The init's "failed to exec pid1" does not always reach the log (read back empty under load):
    // the container's own filesystem says for sure.
    (await nodeOnPath(container, info)) === false
  )
    return noNode(`the server ${status}; its log ends:\n${logs}`);
  if (/SyntaxError/.test(logs))
    return noNode(`the server ${status} with a syntax error (an old Node.js?):\n${logs}`);
  return new DockerSandboxError(
    "server-failed",
    `the server in container ${info.Id.slice(0, 12)} ${status}; its log ends:\n${logs}`,
  );
}

/**
 * Whether a `node` is in one of the PATH directories of a (stopped) container, read from its
 * filesystem through the engine's archive API; undefined when the engine cannot tell.
 */
async function nodeOnPath(
  container: Docker.Container,
  info: Docker.ContainerInspectInfo,
): Promise<boolean | undefined> {
  const pathVariable =
    info.Config.Env?.find((e) => e.startsWith("PATH="))?.slice("PATH=".length) ?? DEFAULT_PATH;
  for (const dir of pathVariable.split(":").filter((d) => d.startsWith("/"))) {
    try {
      const archive = await container.getArchive({ path: `${dir}/node` });
      archive.resume();
      return true;
    } catch (error) {
      if (engineStatus(error) !== 404) return undefined;
    }
  }
  return false;
}

/** The container's last log lines (stdout and stderr, demultiplexed). */
export async function logTail(container: Docker.Container): Promise<string> {
  try {
    const raw = (await container.logs({
      stdout: true,
      stderr: true,
      tail: LOG_TAIL_LINES,
      follow: false,
    })) as Buffer;
    return demultiplex(Buffer.from(raw)).trimEnd() || "(empty)";
  } catch {
    return "(no log available)";
  }
}

/** Strips the 8-byte frame headers of a non-TTY log stream; a TTY stream is returned as is. */
function demultiplex(raw: Buffer): string {
  if (raw.length < 8 || raw[0]! > 2 || raw[1] !== 0) return raw.toString("utf8");
  const parts: Buffer[] = [];
  for (let at = 0; at + 8 <= raw.length;) {
    const size = raw.readUInt32BE(at + 4);
    parts.push(raw.subarray(at + 8, at + 8 + size));
    at += 8 + size;
  }
  return Buffer.concat(parts).toString("utf8");
}

/** The container carrying `key`, if any. */
export async function findByKey(engine: Engine, key: string): Promise<Docker.ContainerInfo | undefined> {
  const found = await engine.docker.listContainers({
    all: true,
    filters: JSON.stringify({ label: [`${LABELS.key}=${key}`] }),
  });
  return found[0];
}

/** The token of a running container's server (written by the provider at its last start). */
export async function readToken(container: Docker.Container, file: string): Promise<string> {
  const { extract } = await import("tar-stream");
  const parser = extract();
  (await container.getArchive({ path: file })).pipe(parser);
  let token = "";
  for await (const entry of parser) {
    for await (const chunk of entry) token += (chunk as Buffer).toString("utf8");
  }
  return token.trim();
}
