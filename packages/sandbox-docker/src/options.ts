/** A bind mount of a host path (or a named volume) into the sandbox. */
export interface DockerMount {
  /** Host path (absolute) or volume name. */
  source: string;
  /** Path inside the container. */
  target: string;
  readOnly?: boolean;
  /** Default `"bind"` for an absolute `source`, else `"volume"`. */
  type?: "bind" | "volume";
}

/** The server inside a started container, as reached from this machine. */
export interface ServerAddress {
  baseUrl: string;
  token: string;
}

export interface DockerSandboxOptions {
  /** Any Linux image with Node.js >= 20 and `/bin/sh` (e.g. `node:22`); the server is injected into it. */
  image: string;
  /**
   * A sandbox key makes the sandbox resumable: `create` reattaches to the container carrying this
   * key (starting it if stopped, skipping the workspace bootstrap that already ran), dispose and
   * host exit stop it instead of removing it, and `destroy(key)` removes it. Without a key the
   * container is removed on dispose and on host exit.
   */
  key?: string;
  /**
   * Sandboxes by id, for a fleet (`createFleet`): the sandbox of id X is the container labelled with
   * key X, which `create` refuses to make twice and `resume`, `stop` and `destroy` find from any
   * process. Instances are handles: `dispose()` and this process's exit leave the container running.
   * Excludes `key`.
   */
  persistent?: boolean;
  /** Engine socket: a path, `unix:///path` or `tcp://host:port`. Default `$DOCKER_HOST`, else `/var/run/docker.sock`. */
  socket?: string;
  /**
   * Plain variables set in the container's config (visible to `docker inspect`). Workspace env and
   * secrets do not go there: they reach only the processes and agents that are started.
   */
  env?: Record<string, string>;
  /** Memory limit: bytes, or a string such as `"512m"`, `"2g"`. */
  memory?: number | string;
  /** CPU limit, e.g. `1.5`. */
  cpus?: number;
  /** Largest number of processes in the container. */
  pidsLimit?: number;
  /** OCI runtime, e.g. `"runsc"` (gVisor) where the engine has it. */
  runtime?: string;
  /**
   * Network mode. Default `"bridge"` (the engine's default network), with the server's port
   * published on 127.0.0.1 only; `"host"` shares this machine's network (the server then binds
   * 127.0.0.1); `"none"` is refused (the server could not be reached). Podman users may pass
   * `"slirp4netns"` or `"pasta"`.
   */
  network?: string;
  /**
   * Ports inside the container that this machine must reach (an agent's own WebSocket ACP server),
   * published on 127.0.0.1 at ports the engine picks; `instance.channel.reach(port)` tells which.
   * With `network: "host"` every port is reachable as it is and this list is not needed.
   */
  ports?: readonly number[];
  mounts?: readonly DockerMount[];
  /** Extra container labels. */
  labels?: Record<string, string>;
  /** Workspace directory inside the container. Default `/workspace`. */
  workdir?: string;
  /** Server agent id used by `openAcp` (overrides the id the harness adapter asks for). */
  agent?: string;
  /** When the image is not present: `"missing"` (default) pulls it, `"never"` fails saying how to get it. */
  pull?: "missing" | "never";
  /** The bundled server directory to inject. Default: the one shipped with `@sandbox-agent/server`. */
  serverBundle?: string;
  /** Time allowed for the server inside to answer its health check. Default 30 s. */
  startTimeoutMs?: number;
}

const UNITS: Record<string, number> = { b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 };

export function parseMemory(value: number | string): number {
  if (typeof value === "number") return value;
  const match = /^(\d+(?:\.\d+)?)\s*([bkmg])?i?b?$/i.exec(value.trim());
  if (match === null) throw new TypeError(`dockerSandbox: invalid memory "${value}" (e.g. "512m", "2g")`);
  return Math.round(Number(match[1]) * (UNITS[(match[2] ?? "b").toLowerCase()] ?? 1));
}

/** Labels the provider sets; `key` and `sandbox` are how containers are found again. */
export const LABELS = {
  managed: "dev.sandboxagent.managed",
  key: "dev.sandboxagent.key",
  sandbox: "dev.sandboxagent.sandbox",
  workdir: "dev.sandboxagent.workdir",
  port: "dev.sandboxagent.port",
  owner: "dev.sandboxagent.owner",
  /** On images made by `snapshot`: their workspace is bootstrapped already. */
  snapshot: "dev.sandboxagent.snapshot",
} as const;

/** The port the server listens on inside the container (published on the host's loopback). */
export const SERVER_PORT = 2468;
