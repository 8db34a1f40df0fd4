import Docker from "dockerode";
import { DockerSandboxError } from "./errors.js";

const DEFAULT_SOCKET = "/var/run/docker.sock";

/** A Docker Engine API client and a description of where it points, for error messages. */
export interface Engine {
  readonly docker: Docker;
  readonly where: string;
  /** How to reach the same engine again (the exit clean-up helper runs in another process). */
  readonly connection: Docker.DockerOptions;
}

/**
 * `socket`: a socket path, `unix:///path`, or `tcp://host:port`. Else `$DOCKER_HOST`, else the
 * default socket `/var/run/docker.sock` (dockerode's own resolution).
 */
export function connectEngine(socket?: string): Engine {
  const spec = socket ?? process.env["DOCKER_HOST"];
  const connection = spec === undefined ? { socketPath: DEFAULT_SOCKET } : parseEngineAddress(spec);
  const where =
    socket !== undefined
      ? `the socket option (${socket})`
      : spec !== undefined
        ? `DOCKER_HOST (${spec})`
        : `the default socket ${DEFAULT_SOCKET}`;
  return { docker: new Docker(connection), where, connection };
}

function parseEngineAddress(spec: string): Docker.DockerOptions {
  if (spec.startsWith("/")) return { socketPath: spec };
  const url = new URL(spec);
  if (url.protocol === "unix:") return { socketPath: url.pathname };
  if (url.protocol === "tcp:" || url.protocol === "http:" || url.protocol === "https:") {
    return {
      host: url.hostname,
      port: url.port === "" ? 2375 : Number(url.port),
      protocol: url.protocol === "https:" ? "https" : "http",
    };
  }
  throw new TypeError(
    `dockerSandbox: unsupported engine address "${spec}" (use a socket path, unix:// or tcp://)`,
  );
}

const UNREACHABLE = new Set(["ENOENT", "ECONNREFUSED", "EACCES", "ECONNRESET", "EHOSTUNREACH", "ETIMEDOUT"]);

/** Turns "nothing listens there" into an error that says how to start an engine; else returns `error`. */
export function unreachable(engine: Engine, error: unknown): unknown {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === undefined || !UNREACHABLE.has(code)) return error;
  const denied = code === "EACCES" ? " (permission denied: is this user allowed on the socket?)" : "";
  return new DockerSandboxError(
    "engine-unreachable",
    `no container engine answers at ${engine.where}${denied}: start dockerd, or Podman's Docker-compatible ` +
      "service (`podman system service --time=0 unix:///run/podman/podman.sock`) and set " +
      "DOCKER_HOST=unix:///run/podman/podman.sock, or pass dockerSandbox({ socket })",
    { cause: error },
  );
}
