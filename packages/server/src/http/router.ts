import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../log.js";
import { ProblemError, problems, sendProblem } from "./problem.js";

export type HttpMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

export interface HttpContext {
  req: IncomingMessage;
  res: ServerResponse;
  /** The request target parsed (made on first use: the `/v2/rpc` handlers never read it). */
  readonly url: URL;
  /** Values of `{name}` segments of the route path. */
  params: Record<string, string>;
}

class Context implements HttpContext {
  private parsed: URL | undefined;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly params: Record<string, string>,
  ) {}

  get url(): URL {
    return (this.parsed ??= requestUrl(this.req));
  }
}

export type Handler = (ctx: HttpContext) => Promise<void> | void;

export interface Route {
  method: HttpMethod;
  /** A path such as `/v2/agents/{id}/install`; `{name}` matches one segment. */
  path: string;
  handler: Handler;
}

interface CompiledRoute extends Route {
  pattern: RegExp;
  names: string[];
}

function compile(route: Route): CompiledRoute {
  const names: string[] = [];
  const source = route.path
    .split("/")
    .map((segment) => {
      const m = /^\{(\w+)\}$/.exec(segment);
      if (!m) return segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      names.push(m[1]!);
      return "([^/]+)";
    })
    .join("/");
  return { ...route, pattern: new RegExp(`^${source}$`), names };
}

interface LazyGroup {
  prefix: string;
  load: () => Promise<Route[]>;
  loading?: Promise<void>;
}

/** The route template (`/v2/processes/{id}`) that answered each response, for logs and metrics. */
const ROUTE = Symbol("route");

/**
 * A property of the response, not a `WeakMap` entry: each entry of a weak map is an ephemeron that
 * every scavenge visits, and setting one per request showed in the instruction count of warm turns.
 */
interface Answered {
  [ROUTE]?: string;
}

/**
 * Names the route template answering `res` (what the router does for a route it matched), for a
 * request answered past the router (server.ts: `POST /v2/rpc`).
 */
export function answeredBy(res: object, route: string): void {
  (res as Answered)[ROUTE] = route;
}

/** The route template that matched the request of `res`, if one did. */
export function matchedRoute(res: object): string | undefined {
  return (res as Answered)[ROUTE];
}

/** A small method + path router: 404 for unknown paths, 405 with `Allow` for known paths. */
type Match = { route: CompiledRoute; match: RegExpExecArray };

export class Router {
  private readonly routes: CompiledRoute[] = [];
  private lazyGroups: LazyGroup[] = [];
  /**
   * The matches of each route path without `{name}` segments (`/v2/rpc`), worked out when routes
   * are added: such a request (every ACP message) then costs one map lookup instead of running
   * every route's pattern, which in a connection's first requests runs in V8's interpreter.
   */
  private exact = new Map<string, Match[]>();

  add(...routes: Route[]): this {
    for (const route of routes) this.routes.push(compile(route));
    this.exact = new Map();
    for (const { path, names } of this.routes) if (names.length === 0) this.exact.set(path, this.scan(path));
    return this;
  }

  /**
   * Routes under `prefix` whose modules are imported on the first request no loaded route
   * matches, so start-up and an idle server do not pay for them. Routes added with `add` win.
   */
  lazy(prefix: string, load: () => Promise<Route[]>): this {
    this.lazyGroups.push({ prefix, load });
    return this;
  }

  /**
   * Runs the handler of the route matching the request at `pathname` (see `requestPath`). Not
   * `async`: a request to a loaded route (every ACP message) costs no promise of its own here; a
   * thrown problem reaches the caller's `await` as a rejection would (see `withProblems`).
   */
  handle(req: IncomingMessage, res: ServerResponse, pathname: string): Promise<void> | void {
    const matching = this.match(pathname);
    if (matching.length === 0) return this.handleLazy(req, res, pathname);
    return this.dispatch(req, res, matching);
  }

  private async handleLazy(req: IncomingMessage, res: ServerResponse, pathname: string): Promise<void> {
    const matching = (await this.loadGroupsFor(pathname)) ? this.match(pathname) : [];
    if (matching.length === 0) throw problems.notFound(`No endpoint at ${pathname}.`);
    await this.dispatch(req, res, matching);
  }

  private dispatch(req: IncomingMessage, res: ServerResponse, matching: Match[]): Promise<void> | void {
    (res as Answered)[ROUTE] = matching[0]!.route.path;
    let hit: Match | undefined;
    for (const m of matching) {
      if (m.route.method !== req.method) continue;
      hit = m;
      break;
    }
    if (!hit) throw problems.methodNotAllowed(matching.map((m) => m.route.method).join(", "));
    const params: Record<string, string> = {};
    const { names } = hit.route;
    for (let i = 0; i < names.length; i++) params[names[i]!] = decodeSegment(hit.match[i + 1]!);
    return hit.route.handler(new Context(req, res, params));
  }

  private match(pathname: string): Match[] {
    return this.exact.get(pathname) ?? this.scan(pathname);
  }

  private scan(pathname: string): Match[] {
    const matching = [];
    for (const route of this.routes) {
      const match = route.pattern.exec(pathname);
      if (match !== null) matching.push({ route, match });
    }
    return matching;
  }

  /** Loads the pending groups covering `pathname`; whether any was loaded. */
  private async loadGroupsFor(pathname: string): Promise<boolean> {
    const groups = this.lazyGroups.filter((g) => pathname.startsWith(g.prefix));
    if (groups.length === 0) return false;
    await Promise.all(groups.map((g) => (g.loading ??= this.loadGroup(g))));
    return true;
  }

  private async loadGroup(group: LazyGroup): Promise<void> {
    try {
      this.add(...(await group.load()));
      this.lazyGroups = this.lazyGroups.filter((g) => g !== group);
    } catch (error) {
      group.loading = undefined; // a later request tries again
      throw error;
    }
  }
}

/**
 * A request target made of letters, digits, `_`, `-` and `/` only, not starting with `//` (which the
 * URL parser reads as a host): its path is itself, as `new URL` would give it (no dot segments,
 * percent-escapes, query or fragment to resolve).
 */
const PLAIN_PATH = /^\/(?!\/)[\w/-]*$/;

/**
 * The path of the request's target, as `requestUrl(req).pathname`. A plain target (every ACP
 * request's `/v2/rpc`) is its own path: parsing a URL (the object, its context and the path's
 * getter, ~3 µs per request in the profile of warm turns) is left to the handlers that read one.
 */
export function requestPath(req: IncomingMessage): string {
  const target = req.url ?? "/";
  return PLAIN_PATH.test(target) ? target : requestUrl(req).pathname;
}

/** The request's URL; a request target even the WHATWG parser refuses (`http://[::1`) is a 400. */
export function requestUrl(req: IncomingMessage): URL {
  try {
    return new URL(req.url ?? "/", "http://localhost");
  } catch {
    throw problems.badRequest(
      `The request target ${JSON.stringify((req.url ?? "").slice(0, 100))} is not a valid URL.`,
    );
  }
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw problems.badRequest(
      `Malformed percent-encoding in the path segment ${JSON.stringify(segment.slice(0, 100))}.`,
    );
  }
}

/**
 * Runs a handler and converts thrown errors to problem+json responses; a response that cannot be
 * answered either (`answering`) is destroyed. `run` and `log` take the request rather than closing
 * over it, so that a request allocates no closures here.
 */
export async function withProblems(
  req: IncomingMessage,
  res: ServerResponse,
  run: (req: IncomingMessage, res: ServerResponse) => Promise<void> | void,
  log: (error: unknown, answering: boolean) => void,
): Promise<void> {
  try {
    await run(req, res);
  } catch (error) {
    answerFailure(res, error, log);
  }
}

/** `withProblems`' log of a failed request: what failed, and whether it was while answering it. */
export function failureLog(logger: Logger): (error: unknown, answering: boolean) => void {
  return (error, answering) =>
    logger.error(answering ? "request failed while answering it" : "request failed", {
      error: String(error),
    });
}

/**
 * `withProblems`' answer to a failed request (a function of its own, out of the function TurboFan
 * compiles for every request: bench/README.md, Cold window); also what answers a request that
 * failed after its handler returned (`rpcPost`).
 */
export function answerFailure(
  res: ServerResponse,
  error: unknown,
  log: (error: unknown, answering: boolean) => void,
): void {
  try {
    if (error instanceof ProblemError) return sendProblem(res, error);
    log(error, false);
    sendProblem(res, problems.internal(error instanceof Error ? error.message : String(error)));
  } catch (failure) {
    log(failure, true);
    res.destroy();
  }
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}
