import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { posix } from "node:path";
import type Docker from "dockerode";
import {
  linkAgentServer,
  shellQuote,
  type PersistentSandboxProvider,
  type ProviderCreateRequest,
  type ProviderInstance,
  type SandboxFiles,
  type SandboxProcess,
  type SandboxProvider,
  type SpawnOptions,
} from "@sandbox-agent/ai-sandbox";
import {
  createContainer,
  ensureImage,
  findByKey,
  freeLoopbackPort,
  publishedPort,
  isHostNetwork,
  readToken,
  startContainer,
  waitForServer,
} from "./container.js";
import { connectEngine, unreachable, type Engine } from "./engine.js";
import { DockerSandboxError, engineMessage, engineStatus } from "./errors.js";
import { execInContainer } from "./exec.js";
import { directoryArchive } from "./host-archive.js";
import { trackContainer } from "./lifecycle.js";
import { LABELS, type DockerSandboxOptions, type ServerAddress } from "./options.js";
import { defaultBundleDir, serverArchive, STATE_DIR, TOKEN_FILE, tokenArchive } from "./server-bundle.js";

const DEFAULT_WORKDIR = "/workspace";
const DEFAULT_START_TIMEOUT_MS = 30_000;
const BOOTSTRAPPED = `${STATE_DIR}/bootstrapped`;

/** A container sandbox as the provider hands it out (before `defineSandbox` adds the workspace). */
export interface DockerSandboxInstance extends ProviderInstance {
  readonly containerId: string;
  /** The sandbox key, for keyed (resumable) sandboxes. */
  readonly key: string | undefined;
  /** The server inside, as reached from this machine (loopback URL and bearer token). */
  readonly server: ServerAddress;
  /** Commits the container to an image (`repo:tag`); create a sandbox from it to restore. */
  snapshot(options?: { tag?: string }): Promise<string>;
  /** Removes the container and its files, keyed or not. */
  destroy(): Promise<void>;
}

export interface DockerSandboxProvider extends SandboxProvider {
  readonly name: "docker";
  create(request: ProviderCreateRequest): Promise<DockerSandboxInstance>;
  /**
   * Reattaches to the sandbox with this key, from any process: starts it if stopped (with a fresh
   * token) and returns it with its workspace as it was. `env` is the workspace env and secrets for
   * the processes started from now on (they are never stored with the container).
   */
  resume(key: string, request?: Partial<ProviderCreateRequest>): Promise<DockerSandboxInstance>;
  /** Removes the sandbox with this key; false when there is none. */
  destroy(key: string): Promise<boolean>;
}

/**
 * `dockerSandbox({ persistent: true })`: sandboxes by id for a fleet (`createFleet`), each the
 * container labelled with its id as key, found again from any process. Its instances are handles:
 * `dispose()` and this process's exit leave the container as it is (the fleet stops and destroys).
 */
export interface DockerPersistentProvider extends PersistentSandboxProvider {
  readonly name: "docker";
  /** A new container for `request.id`; fails with `exists` when there is one already. */
  create(request: ProviderCreateRequest): Promise<DockerSandboxInstance>;
  /**
   * The container of `request.id`, started if stopped (with a fresh token); undefined when there is
   * none. `bootstrapped` says whether its first workspace bootstrap finished.
   */
  resume(request: ProviderCreateRequest): Promise<DockerSandboxInstance | undefined>;
  /** Stops the container (its files stay); no error when it is not running or absent. */
  stop(id: string): Promise<void>;
  /** Removes the container and its anonymous volumes; no error when absent. */
  destroy(id: string): Promise<void>;
}

/** What `dispose()` and this process's exit do with the container. */
type Keep = "remove" | "stop" | "leave";

interface Placement {
  /** The label the container is found by again (keyed and persistent sandboxes). */
  key: string | undefined;
  keep: Keep;
}

/**
 * A sandbox in a container of any Docker-Engine-API engine (Docker, Podman's compatible service).
 * The bundled server is copied into the image's container and runs as its main process (under
 * `--init`), listening on a port published on 127.0.0.1 only; files and agents go through it, and
 * commands run with `docker exec`.
 */
export function dockerSandbox(options: DockerSandboxOptions & { persistent: true }): DockerPersistentProvider;
export function dockerSandbox(options: DockerSandboxOptions): DockerSandboxProvider;
export function dockerSandbox(
  options: DockerSandboxOptions,
): DockerSandboxProvider | DockerPersistentProvider {
  if (options.network === "none")
    throw new TypeError(
      'dockerSandbox: network "none" leaves the server unreachable; use "bridge" or "host"',
    );
  if (options.key !== undefined) checkKey(options.key);
  if (options.persistent && options.key !== undefined)
    throw new TypeError(
      "dockerSandbox: give key or persistent, not both (persistent sandboxes are keyed by id)",
    );
  let engine: Engine | undefined;
  const connect = () => (engine ??= connectEngine(options.socket));
  const guarded = async <T>(work: (engine: Engine) => Promise<T>): Promise<T> => {
    const current = connect();
    try {
      return await work(current);
    } catch (error) {
      throw unreachable(current, error);
    }
  };
  if (options.persistent) return persistentProvider(options, guarded);
  const keyed: Placement = { key: options.key, keep: options.key === undefined ? "remove" : "stop" };
  const resume = (key: string, request: Partial<ProviderCreateRequest> = {}) =>
    guarded(async (current) => {
      const found = await findByKey(current, key);
      if (found === undefined)
        throw new DockerSandboxError("not-found", `no docker sandbox with key "${key}" on ${current.where}`);
      const full = { id: request.id ?? found.Labels[LABELS.sandbox] ?? key, env: request.env ?? {} };
      return attach(current, options, found.Id, full, { key, keep: "stop" });
    });
  return {
    name: "docker",
    create: (request) =>
      guarded(async (current) => {
        const { key } = options;
        const found = key === undefined ? undefined : await findByKey(current, key);
        if (key !== undefined && found !== undefined) {
          const container = current.docker.getContainer(found.Id);
          if (await isBootstrapped(container)) return attach(current, options, found.Id, request, keyed);
          // A first start that failed or was interrupted: start over with a fresh container.
          await removeContainer(container);
        }
        return createNew(current, options, request, keyed);
      }),
    resume,
    destroy: (key) =>
      guarded(async (current) => {
        const found = await findByKey(current, key);
        if (found === undefined) return false;
        await removeContainer(current.docker.getContainer(found.Id));
        return true;
      }),
  };
}

type Guarded = <T>(work: (engine: Engine) => Promise<T>) => Promise<T>;

/**
 * Sandboxes by id, for a fleet. How a replica that did not create a sandbox gets its server's
 * token: it reads the token file the provider wrote into the container at its last start, through
 * the engine (as `resume(key)` does). Whoever can do that can also exec into the container, so it
 * exposes nothing new; the token is never in the store, nor in the container's configuration, and
 * no application secret has to be shared between replicas. A stopped container gets a fresh token
 * when it starts.
 */
function persistentProvider(options: DockerSandboxOptions, guarded: Guarded): DockerPersistentProvider {
  const find = (engine: Engine, id: string) => findByKey(engine, checkKey(id));
  return {
    name: "docker",
    create: (request) =>
      guarded(async (current) => {
        if ((await find(current, request.id)) !== undefined) throw exists(request.id, current);
        return createNew(current, options, request, { key: request.id, keep: "leave" });
      }),
    resume: (request) =>
      guarded(async (current) => {
        const found = await find(current, request.id);
        if (found === undefined) return undefined;
        return attach(current, options, found.Id, request, { key: request.id, keep: "leave" });
      }),
    stop: (id) =>
      guarded(async (current) => {
        const found = await find(current, id);
        if (found !== undefined) await stopContainer(current.docker.getContainer(found.Id));
      }),
    destroy: (id) =>
      guarded(async (current) => {
        const found = await find(current, id);
        if (found !== undefined) await removeContainer(current.docker.getContainer(found.Id));
      }),
  };
}

function checkKey(key: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(key))
    throw new TypeError(`dockerSandbox: invalid key "${key}" (letters, digits, '.', '_', '-')`);
  return key;
}

function exists(key: string, engine: Engine): DockerSandboxError {
  return new DockerSandboxError(
    "exists",
    `a docker sandbox with key "${key}" exists already on ${engine.where}: resume it, or destroy it first`,
  );
}

function mintToken(): string {
  return randomBytes(24).toString("base64url");
}

function containerName(request: ProviderCreateRequest, key: string | undefined): string {
  const safe = (value: string) => value.replace(/[^A-Za-z0-9_.-]/g, "_");
  return key !== undefined
    ? `sandbox-agent-${safe(key)}`
    : `sandbox-agent-${safe(request.id)}-${randomBytes(4).toString("hex")}`;
}

async function createNew(
  engine: Engine,
  options: DockerSandboxOptions,
  request: ProviderCreateRequest,
  placement: Placement,
): Promise<DockerSandboxInstance> {
  const bundle = options.serverBundle ?? defaultBundleDir();
  const token = mintToken();
  const [archive, image] = await Promise.all([
    serverArchive(bundle, token),
    ensureImage(engine, options.image, options.pull ?? "missing"),
  ]);
  const workdir = options.workdir ?? DEFAULT_WORKDIR;
  const hostPort = isHostNetwork(options) ? await freeLoopbackPort() : undefined;
  const { key } = placement;
  let container: Docker.Container;
  try {
    container = await createContainer(engine, options, {
      name: containerName(request, key),
      workdir,
      hostPort,
      labels: {
        [LABELS.managed]: "1",
        [LABELS.sandbox]: request.id,
        [LABELS.workdir]: workdir,
        ...(key !== undefined ? { [LABELS.key]: key } : { [LABELS.owner]: `${hostname()}:${process.pid}` }),
        ...(hostPort !== undefined ? { [LABELS.port]: String(hostPort) } : {}),
      },
    });
  } catch (error) {
    // Another process created the same key first: a keyed sandbox uses that one, a fleet's refuses.
    if (key !== undefined && engineStatus(error) === 409) {
      if (placement.keep === "leave") throw exists(key, engine);
      const found = await findByKey(engine, key);
      if (found !== undefined) return attach(engine, options, found.Id, request, placement);
    }
    throw error;
  }
  const untrack = track(engine, container.id, placement.keep);
  try {
    const address = await startContainer(container, archive, token, startTimeout(options));
    const instance = sandboxInstance(engine, options, container, address, request, {
      ...placement,
      workdir,
      untrack,
    });
    // An image committed from a sandbox (`snapshot`) already holds its workspace.
    return image.Config.Labels?.[LABELS.snapshot] !== undefined
      ? { ...instance, bootstrapped: true }
      : instance;
  } catch (error) {
    untrack();
    await removeContainer(container);
    throw error;
  }
}

/**
 * Whether a keyed container finished its first workspace bootstrap. Asked of the engine, not of
 * the server (whose file API loads on first use).
 */
async function isBootstrapped(container: Docker.Container): Promise<boolean> {
  // GET, not HEAD (`infoArchive`): Podman's answer to HEAD leaves the connection in use.
  try {
    const tar = await container.getArchive({ path: BOOTSTRAPPED });
    (tar as NodeJS.ReadableStream & { resume(): void }).resume();
    return true;
  } catch (error) {
    if (engineStatus(error) === 404) return false;
    throw error;
  }
}

/** Exit clean-up for the container, unless it is left as it is (a fleet's). */
function track(engine: Engine, id: string, keep: Keep): () => void {
  if (keep === "leave") return () => undefined;
  return trackContainer({ connection: engine.connection, id, action: keep });
}

/**
 * An existing keyed container, started when stopped. `bootstrapped`: true for a keyed sandbox (its
 * `create` replaces one whose bootstrap never finished); for a fleet's, whether it finished.
 */
async function attach(
  engine: Engine,
  options: DockerSandboxOptions,
  id: string,
  request: ProviderCreateRequest,
  placement: Placement,
): Promise<DockerSandboxInstance> {
  const container = engine.docker.getContainer(id);
  // The token is only read when the container runs; reading it alongside the inspection saves a round trip.
  const token = readToken(container, TOKEN_FILE);
  token.catch(() => undefined);
  const info = await container.inspect();
  const timeout = startTimeout(options);
  const untrack = track(engine, id, placement.keep);
  try {
    let address: ServerAddress;
    if (info.State.Running) {
      address = await waitForServer(container, await token, timeout, info);
    } else {
      const fresh = mintToken();
      address = await startContainer(container, await tokenArchive(fresh), fresh, timeout);
    }
    const workdir = info.Config.Labels?.[LABELS.workdir] ?? options.workdir ?? DEFAULT_WORKDIR;
    const instance = sandboxInstance(engine, options, container, address, request, {
      ...placement,
      workdir,
      untrack,
    });
    const bootstrapped = placement.keep === "leave" ? await isBootstrapped(container) : true;
    return { ...instance, bootstrapped };
  } catch (error) {
    untrack();
    throw error;
  }
}

function startTimeout(options: DockerSandboxOptions): number {
  return options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
}

async function stopContainer(container: Docker.Container): Promise<void> {
  await container.stop({ t: 2 }).catch((error: unknown) => {
    if (engineStatus(error) !== 304 && engineStatus(error) !== 404) throw error;
  });
}

async function removeContainer(container: Docker.Container): Promise<void> {
  try {
    await container.remove({ force: true, v: true });
  } catch (error) {
    if (engineStatus(error) !== 404) throw error;
  }
}

interface InstanceSpec extends Placement {
  workdir: string;
  untrack: () => void;
}

function sandboxInstance(
  engine: Engine,
  options: DockerSandboxOptions,
  container: Docker.Container,
  address: ServerAddress,
  request: ProviderCreateRequest,
  spec: InstanceSpec,
): DockerSandboxInstance {
  const { workdir, key } = spec;
  const server = linkAgentServer(
    { ...address, workdir, fsRoot: "/", ...(options.agent !== undefined ? { agent: options.agent } : {}) },
    request.env,
  );
  const processes = new Set<SandboxProcess>();
  let closed: Promise<void> | undefined;

  const spawn = async (command: string, opts: SpawnOptions = {}): Promise<SandboxProcess> => {
    if (closed !== undefined) throw new Error(`sandbox "${request.id}" is disposed`);
    const proc = await execInContainer(engine.docker, container, command, {
      cwd: posix.resolve(workdir, opts.cwd ?? "."),
      env: { ...request.env, ...opts.env },
    }).catch((error: unknown) => {
      throw containerGone(error, container.id, key) ?? error;
    });
    processes.add(proc);
    void proc.exited.then(() => processes.delete(proc));
    return proc;
  };
  const run = async (command: string): Promise<void> => {
    const proc = await spawn(command);
    await proc.stdin.close();
    void proc.stdout.pipeTo(new WritableStream()).catch(() => undefined);
    const { code } = await proc.exited;
    if (code !== 0) throw new Error(`"${command}" failed in the sandbox: ${proc.stderrTail().trim()}`);
  };
  const files: SandboxFiles = {
    readFile: (path) => server.files.readFile(path),
    writeFile: (path, data) => server.files.writeFile(path, data),
    list: (dir, listOptions) => server.files.list(dir, listOptions),
    remove: (path) => server.files.remove(path),
    symlink: (target, linkPath) => {
      const link = posix.resolve(workdir, linkPath);
      return run(
        `mkdir -p ${shellQuote(posix.dirname(link))} && ln -sfn ${shellQuote(target)} ${shellQuote(link)}`,
      );
    },
  };
  const release = (end: () => Promise<void>): Promise<void> =>
    (closed ??= (async () => {
      spec.untrack();
      await server.closeAll();
      // Stopping or removing the container ends every process in it: no signal one by one.
      await end();
      await Promise.all([...processes].map((proc) => proc.exited));
    })());

  return {
    id: request.id,
    provider: "docker",
    workdir,
    stateDir: STATE_DIR,
    env: Object.freeze({ ...request.env }),
    files,
    channel: { url: "http://127.0.0.1", reach: (port) => publishedPort(container, port) },
    spawn,
    openAcp: server.openAcp,
    importDirectory: async (hostDir, dest) => {
      await container.putArchive(await directoryArchive(hostDir, posix.resolve(workdir, dest)), {
        path: "/",
      });
    },
    markBootstrapped: () => files.writeFile(BOOTSTRAPPED, `${new Date().toISOString()}\n`),
    providerId: container.id,
    endpoint: address.baseUrl,
    containerId: container.id,
    key,
    server: address,
    snapshot: async (snapshotOptions = {}) => {
      const [repo, tag] = splitTag(
        snapshotOptions.tag ?? `sandbox-agent-snapshot:${key ?? request.id}-${Date.now()}`,
      );
      await container.commit({
        repo,
        tag,
        comment: `sandbox-agent snapshot of ${key ?? request.id}`,
        changes: `LABEL ${LABELS.snapshot}=${key ?? request.id}`,
      });
      return `${repo}:${tag}`;
    },
    destroy: () => release(() => removeContainer(container)),
    // A keyed sandbox is kept (stopped) for a later resume, a fleet's left running; any other is removed.
    dispose: () =>
      release(async () => {
        if (spec.keep === "remove") await removeContainer(container);
        else if (spec.keep === "stop") await stopContainer(container);
      }),
  };
}

/**
 * An exec refused because the container is stopped or removed, said plainly. Docker answers 409
 * ("is not running") or 404; Podman 500 ("can only create exec sessions on running containers").
 */
function containerGone(error: unknown, id: string, key: string | undefined): DockerSandboxError | undefined {
  const status = engineStatus(error);
  const stopped =
    status === 409 || /not running|running containers|state improper/i.test(engineMessage(error));
  if (!stopped && status !== 404) return undefined;
  const next =
    key === undefined
      ? "create a new sandbox"
      : `create the sandbox again (or resume("${key}")) to start it with its files`;
  return new DockerSandboxError(
    "container-gone",
    `the sandbox container ${id.slice(0, 12)} is ${stopped ? "not running" : "gone"}: ${next}`,
    { cause: error },
  );
}

function splitTag(reference: string): [string, string] {
  const colon = reference.lastIndexOf(":");
  return colon > reference.lastIndexOf("/")
    ? [reference.slice(0, colon), reference.slice(colon + 1)]
    : [reference, "latest"];
}
