import { createWriteStream, mkdirSync, type WriteStream } from "node:fs";
import path from "node:path";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { resolveLaunch } from "./agents/launch.js";
import { AgentRegistry } from "./agents/registry.js";
import type { AgentConfigEntry } from "./agents/types.js";
import { HEALTH_PATH, healthRoute } from "./control-plane/health.js";
import { advertisementRecorder } from "./extensions/last-initialize.js";
import { createHttpListener } from "./http/listener.js";
import { sendProblem } from "./http/problem.js";
import { answerFailure, answeredBy, failureLog, requestPath, Router, withProblems } from "./http/router.js";
import { checkRequest } from "./http/security.js";
import { unavailable } from "./http/unavailable.js";
import { createLogger, type LogFormat, type Logger, type LogLevel } from "./log.js";
import { recordRequest } from "./observability/access-log.js";
import { connectionEvents } from "./observability/connection-events.js";
import { ServerMetrics } from "./observability/metrics.js";
import { metricsRoute } from "./observability/metrics-route.js";
import { ProcessManager } from "./processes/manager.js";
import type { ProcessLimits } from "./processes/limits.js";
import { TicketBook } from "./http/tickets.js";
import type { UpgradeHandler } from "./http/upgrade.js";
import { ConnectionRegistry } from "./runtime/connections.js";
import { descriptorBudget, descriptorsNeeded } from "./runtime/descriptors.js";
import type { JsonRpcMessage } from "./protocol.js";
import type { ConnectionExtension } from "./runtime/extension.js";
import { DEFAULT_LIMITS, type RuntimeLimits } from "./runtime/options.js";
import { OrphanGuard } from "./runtime/orphan-guard.js";
import {
  DEFAULT_EVENT_LOG_OPTIONS,
  diskStore,
  memoryStore,
  type EventLogOptions,
  type EventStore,
} from "./store/event-store.js";
import { RPC_PATH, rpcPost, rpcRoutes } from "./transport/rpc-routes.js";
import type { RpcSocketServer } from "./transport/websocket.js";
import { isInspectorPath } from "./ui/public-path.js";

export interface ServerOptions {
  host?: string;
  port?: number;
  /** Bearer token; required when binding a non-loopback address. */
  token?: string;
  allowedOrigins?: string[];
  allowedHosts?: string[];
  /** Config agents: with `command` an agent of their own, without one an adjusted built-in. */
  agents?: Record<string, AgentConfigEntry>;
  /** Agent used when `initialize` names none. Unset: such an initialize is a 400. */
  defaultAgent?: string;
  /** Variables every agent accepts from clients in `initialize` (`"*"`: any), besides its own list. */
  allowClientEnv?: string[];
  dataDir: string;
  /** Install an agent that is not installed yet on `initialize` (else 409 with how to install it). */
  autoInstall?: boolean;
  /**
   * Working directory of agent processes (and default root of the filesystem API); default
   * `<dataDir>/workspace`, created if missing (never the server's own working directory).
   */
  workdir?: string;
  /** Root of the filesystem API (`/v2/fs/*`); default: `workdir`. */
  fsRoot?: string;
  /** Largest upload `PUT /v2/fs/file` accepts, in bytes; default: unlimited. */
  fsMaxUploadBytes?: number;
  limits?: Partial<RuntimeLimits>;
  /** Limits of the process API (`/v2/processes`). */
  processLimits?: Partial<ProcessLimits>;
  /** The event log: on disk under `dataDir` (default) or `inMemory`, `fsync`, retention. */
  eventLog?: Partial<EventLogOptions>;
  logLevel?: LogLevel;
  /** `text` (default) or `json`: one object per line. */
  logFormat?: LogFormat;
  logger?: Logger;
  /**
   * Called once, before the server's first piece of work beyond health checks: connections an
   * earlier run left to recover, or the first request other than `GET /v2/health` (a WebSocket
   * upgrade too). The `server` command arms the young generation's cap here (`young-generation.ts`),
   * so that an idle server does without what it loads.
   */
  onFirstWork?: () => void;
  /**
   * Called once, when what connections load on first use (the extensions, zod) has loaded: after
   * it, connections run only the request path. The `server` command sets V8's interrupt budget
   * here (`server-v8-flags.ts`), so that this one-time loading runs under V8's default budget.
   */
  onConnectionCodeLoaded?: () => void;
}

export interface RunningServer {
  url: string;
  port: number;
  server: Server;
  connections: ConnectionRegistry;
  /** The limits in force, with the defaults derived from the descriptor limit. */
  limits: RuntimeLimits;
  /**
   * Shuts down: stops accepting at once (requests still arriving on open sockets get a 503), stops
   * every agent (SIGTERM, SIGKILL one `killGraceMs` later), then closes every socket. Idempotent.
   */
  close(): Promise<void>;
  /** Hurries a shutdown under way: SIGKILL to every agent now. */
  hurry(): void;
}

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"]);

export function isLoopback(host: string): boolean {
  return LOOPBACK.has(host) || host.startsWith("127.");
}

/** Starts the HTTP server: `/v2/rpc` transport, control plane, security middleware. */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const host = options.host ?? "127.0.0.1";
  const budget = descriptorBudget();
  const limits: RuntimeLimits = { ...DEFAULT_LIMITS, ...budget.defaults, ...options.limits };
  const workdir = options.workdir ?? path.join(options.dataDir, "workspace");
  mkdirSync(workdir, { recursive: true });
  mkdirSync(path.join(options.dataDir, "logs"), { recursive: true });
  // Opened with the first line: an idle server at `warn` writes none (the file stream's modules and
  // an open are start-up time).
  let logFile: WriteStream | undefined;
  let logFileFailed = false;
  const openLogFile = (): WriteStream => {
    const file = createWriteStream(path.join(options.dataDir, "logs", "server.log"), { flags: "a" });
    // A full disk must not end the server: it goes on logging to stderr only.
    file.on("error", (error) => {
      if (!logFileFailed)
        process.stderr.write(`sandbox-agent: cannot write the log file: ${error.message}\n`);
      logFileFailed = true;
    });
    return file;
  };
  const logger =
    options.logger ??
    createLogger(
      options.logLevel ?? "info",
      (line) => {
        process.stderr.write(line);
        if (!logFileFailed) (logFile ??= openLogFile()).write(line);
      },
      options.logFormat,
    );
  if (budget.limit !== undefined && descriptorsNeeded(limits) > budget.limit - budget.inUse) {
    logger.warn(
      "limits.maxConnections and limits.maxSockets exceed the descriptor limit: expect 503s from failed spawns",
      {
        nofile: budget.limit,
        maxConnections: limits.maxConnections,
        maxSockets: limits.maxSockets,
      },
    );
  }
  const registry = new AgentRegistry(options.agents, options.dataDir, { clientEnv: options.allowClientEnv });
  const guard = new OrphanGuard(limits.killGraceMs, logger);
  const store = openStore(options, logger);
  const metrics = new ServerMetrics();
  const connections = new ConnectionRegistry({
    idleMs: limits.idleMs,
    maxConnections: limits.maxConnections,
    logger,
    guard,
    store,
    observer: connectionEvents(logger, metrics),
  });
  const processes = new ProcessManager({ workdir, limits: options.processLimits, logger });
  const fsRoot = options.fsRoot ?? workdir;
  // The Sandbox extensions validate their params with zod: imported with the first connection, so
  // an idle server never loads them (start-up time and idle memory).
  let extensions: Promise<ConnectionExtension[]> | undefined;
  const loadExtensions = () =>
    (extensions ??= import("./extensions/index.js").then((m) => {
      options.onConnectionCodeLoaded?.();
      return [
        advertisementRecorder(options.dataDir),
        ...m.sandboxExtensions({
          logger,
          processes,
          fsRoot,
          workdir,
          sessions: store.table("sessions"),
          connections: store.table("connectionState"),
        }),
      ];
    }));

  const launchOptions = {
    registry,
    defaultAgent: options.defaultAgent,
    autoInstall: options.autoInstall ?? false,
    workdir,
    logger,
  };
  const launch = (initialize: JsonRpcMessage) => resolveLaunch(initialize, launchOptions);
  let onFirstWork = options.onFirstWork;
  const firstWork = (): void => {
    const call = onFirstWork;
    onFirstWork = undefined;
    call?.();
  };
  // Connections an earlier run left in the event log are back before the first request is served.
  if (connections.hasRecords) firstWork();
  const recoveryStart = Date.now();
  const recovered = await connections.recover({
    limits,
    logger,
    extensions: loadExtensions,
    relaunch: (record) => launch(record.initialize),
  });
  if (recovered > 0)
    logger.info("recovered connections", { count: recovered, ms: Date.now() - recoveryStart });

  const rpc = { connections, limits, logger, extensions: loadExtensions, launch };
  const tickets = new TicketBook(RPC_TICKET_TTL_MS);
  const router = new Router()
    .add(...rpcRoutes(rpc, tickets))
    .add(healthRoute({ connections, workdir, fsRoot }))
    .add(metricsRoute({ metrics, connections, processes }))
    // The rest of the control plane (agents, filesystem, OpenAPI) and zod load on first use.
    .lazy("/v2/", async () =>
      (await import("./control-plane/routes.js")).controlPlaneRoutes({
        registry,
        connections,
        dataDir: options.dataDir,
        workdir,
        fsRoot,
        fsMaxUploadBytes: options.fsMaxUploadBytes,
        processes,
        logger,
      }),
    )
    // The inspector page's static files, read from disk only once /ui is requested.
    .lazy("/ui", async () => (await import("./ui/routes.js")).inspectorRoutes());

  const security = {
    token: options.token,
    allowedOrigins: options.allowedOrigins ?? [],
    allowedHosts: options.allowedHosts ?? [],
    loopbackOnly: isLoopback(host),
  };
  // The inspector's files hold no data and a navigation cannot send a bearer token (see ui/public-path.ts).
  const publicSecurity = { ...security, token: undefined };
  let draining = false;
  const observed = { logger, metrics };
  // In-flight accounting, the access log and the metrics, from one `close` listener per response.
  const inFlight = new InFlight(recordRequest, observed);
  // HTTP/1.1 and h2c (HTTP/2 with prior knowledge) on the same port, same handler.
  // Not `async`, nor is `Router.handle` for a loaded route: the handler's promise is the request's only one.
  const route = (req: IncomingMessage, res: ServerResponse): Promise<void> | void => {
    const pathname = requestPath(req);
    if (!checkRequest(req, res, isInspectorPath(pathname) ? publicSecurity : security)) return;
    return router.handle(req, res, pathname);
  };
  const logFailure = failureLog(logger);
  const postRpc = rpcPost(rpc);
  /**
   * `POST /v2/rpc` with nothing after the path (every ACP message but the stream's GET and the
   * DELETE), past `route` and the router: what they do for it (the security checks, a POST is never
   * a preflight; the route's name for the access log and metrics), without their promises and
   * context objects. Any other target (a query, `/v2/rpc/`) takes the router, to the same handler.
   */
  const postRpcDirect = (req: IncomingMessage, res: ServerResponse): void => {
    try {
      checkRequest(req, res, security);
      answeredBy(res, RPC_PATH);
      postRpc(req, res);
    } catch (error) {
      answerFailure(res, error, logFailure);
    }
  };
  // One listener for every response, not a closure per request.
  const onResponseError = (error: Error): void => logger.warn("response error", { error: String(error) });
  const listener = createHttpListener(
    (req, res) => {
      if (onFirstWork !== undefined && req.url !== HEALTH_PATH) firstWork();
      inFlight.track(res);
      // Writing after the end emits "error" on the response; unheard, it would end the server.
      res.on("error", onResponseError);
      if (draining) return sendProblem(res, shuttingDown(req.httpVersionMajor));
      if (req.url === RPC_PATH && req.method === "POST") return postRpcDirect(req, res);
      void withProblems(req, res, route, logFailure);
    },
    {
      maxSockets: limits.maxSockets,
      maxStreamsPerSocket: limits.maxStreamsPerSocket,
      headersTimeoutMs: limits.headersTimeoutMs,
      requestTimeoutMs: limits.requestTimeoutMs,
      keepAliveTimeoutMs: 65_000,
    },
  );
  const { server } = listener;
  // WebSockets: `/v2/rpc` and terminals (`GET /v2/processes/{id}/terminal`); `ws` loads with the first upgrade.
  let rpcSockets: Promise<RpcSocketServer> | undefined;
  let terminals: Promise<UpgradeHandler> | undefined;
  const upgradeHandler = (req: IncomingMessage): Promise<UpgradeHandler> => {
    if (req.url?.split("?")[0] === RPC_PATH) {
      rpcSockets ??= import("./transport/websocket.js").then((m) =>
        m.rpcSocketServer({ ...rpc, security, tickets, path: RPC_PATH }),
      );
      return rpcSockets.then((s) => s.handle);
    }
    return (terminals ??= import("./processes/terminal-socket.js").then((m) =>
      m.terminalUpgradeHandler({ manager: processes, security, logger }),
    ));
  };
  server.on("upgrade", (req, socket, head) => {
    firstWork();
    socket.on("error", () => socket.destroy());
    if (draining) {
      socket.destroy();
      return;
    }
    upgradeHandler(req).then(
      (handle) => handle(req, socket, head),
      (error: unknown) => {
        logger.error("upgrade failed", { error: String(error) });
        socket.destroy();
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 2468, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  // After start, an "error" is a failed accept (EMFILE: libuv drops that connection); unheard, it would end the server.
  server.on("error", (error) => logger.error("listener error", { error: String(error) }));
  const address = server.address() as AddressInfo;
  const urlHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
  let closing: Promise<void> | undefined;
  const shutdown = async (): Promise<void> => {
    draining = true;
    // Stop accepting now; Node also closes idle keep-alive sockets here.
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    void rpcSockets?.then((s) => s.close());
    await Promise.all([connections.shutdown(), processes.shutdown()]);
    store.close();
    guard.close();
    // Answers still being written (e.g. the 503 of an initialize whose agent the shutdown just
    // stopped) get a moment to go out before every socket is closed.
    await inFlight.settled(SHUTDOWN_DRAIN_MS);
    listener.closeAllConnections(SHUTDOWN_DRAIN_MS);
    await closed;
    logFile?.end();
  };
  return {
    url: `http://${urlHost}:${address.port}`,
    port: address.port,
    server,
    connections,
    limits,
    close: () => (closing ??= shutdown()),
    hurry: () => connections.hurry(),
  };
}

/** Lifetime of a `/v2/rpc` WebSocket ticket. */
const RPC_TICKET_TTL_MS = 30_000;

/** The event log: in `<dataDir>/event-log/` unless `eventLog.inMemory`. */
function openStore(options: ServerOptions, logger: Logger): EventStore {
  const eventLog = { ...DEFAULT_EVENT_LOG_OPTIONS, ...options.eventLog };
  if (eventLog.inMemory) return memoryStore();
  return diskStore(options.dataDir, eventLog, (message, fields) => logger.error(message, fields));
}

/** At most how long shutdown waits for answers in progress once every agent is gone. */
const SHUTDOWN_DRAIN_MS = 1000;

/**
 * Counts requests whose response is not closed yet, and hands each closed response to `onClosed`
 * with `context` (the access log and the metrics): the only `close` listener a response gets from
 * the server. `closed` calls `onClosed` itself, no helper or wrapper closure in between: each would
 * be a TurboFan job of its own in a connection's first requests (bench/README.md, "The
 * client-request path's compile jobs").
 */
class InFlight<C> {
  private count = 0;
  private onIdle: (() => void) | undefined;
  /**
   * Shared by every response (a closure per request is an allocation on every request's path);
   * node calls it with the response as `this`.
   */
  private readonly closed: (this: ServerResponse) => void;

  constructor(onClosed: (res: ServerResponse, context: C) => void, context: C) {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- `this` is the response in `closed`
    const inFlight = this;
    this.closed = function (this: ServerResponse) {
      if (--inFlight.count === 0) inFlight.onIdle?.();
      onClosed(this, context);
    };
  }

  track(res: ServerResponse): void {
    this.count++;
    // `on`, not `once`: a response closes once, and `once` wraps the listener and removes it when
    // it fires (Node's `removeListener` was one of TurboFan's larger jobs in a connection's first
    // requests; bench/README.md, Cold window).
    res.on("close", this.closed);
  }

  /** Resolves when no response is open any more, or after `ms`. */
  settled(ms: number): Promise<void> {
    if (this.count === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.onIdle = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

/** The answer to any request once shutdown has begun; HTTP/1.1 sockets are closed after it. */
function shuttingDown(httpVersionMajor: number) {
  return unavailable(
    "The server is shutting down.",
    { reason: "shutting_down" },
    1,
    httpVersionMajor === 1 ? { connection: "close" } : {},
  );
}
