import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { stopChild } from "./server-process.js";

/**
 * A separate Node process a test drives by calls, e.g. a second replica of an application: the test
 * sends `{id, method, params}` lines on its stdin, it answers `{id, result}` or `{id, error}` lines on
 * stdout and may push `{event, data}` lines at any time. It exits when its stdin closes, so a dead test
 * never leaves workers behind.
 */
export interface Worker {
  readonly process: ChildProcess;
  call<T = unknown>(method: string, params?: unknown): Promise<T>;
  /** Every `{event, data}` the worker pushed so far with this name, in order. */
  events<T = unknown>(name: string): T[];
  /** What the worker printed on stderr so far. */
  stderr(): string;
  /** Closes its stdin and waits for it to exit (SIGTERM, then SIGKILL, after 5 s). */
  stop(): Promise<void>;
}

interface Reply {
  id?: number;
  result?: unknown;
  error?: string;
  event?: string;
  data?: unknown;
}

/** Starts `script` (a built `.js` file that calls `serveWorker`) with this Node. */
export function startWorker(
  script: string,
  options: { env?: Record<string, string>; args?: string[] } = {},
): Worker {
  const child = spawn(process.execPath, [script, ...(options.args ?? [])], {
    env: { ...process.env, ...options.env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  const pushed = new Map<string, unknown[]>();
  let stderr = "";
  let nextId = 1;
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  createInterface({ input: child.stdout! }).on("line", (line) => {
    const reply = JSON.parse(line) as Reply;
    if (reply.event !== undefined) {
      const list = pushed.get(reply.event) ?? [];
      list.push(reply.data);
      pushed.set(reply.event, list);
      return;
    }
    const call = pending.get(reply.id!);
    pending.delete(reply.id!);
    if (reply.error !== undefined) call?.reject(new Error(reply.error));
    else call?.resolve(reply.result);
  });
  child.once("exit", (code, signal) => {
    const error = new Error(`worker ${script} exited (${signal ?? code}) before answering:\n${stderr}`);
    for (const call of pending.values()) call.reject(error);
    pending.clear();
  });
  return {
    process: child,
    call: <T>(method: string, params?: unknown) =>
      new Promise<T>((resolve, reject) => {
        if (child.exitCode !== null || child.signalCode !== null) {
          return reject(new Error(`worker ${script} has exited:\n${stderr}`));
        }
        const id = nextId++;
        pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
        child.stdin!.write(JSON.stringify({ id, method, params }) + "\n");
      }),
    events: <T>(name: string) => (pushed.get(name) ?? []) as T[],
    stderr: () => stderr,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      child.stdin!.end();
      const timer = setTimeout(() => void stopChild(child), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

export type WorkerHandlers = Record<string, (params: never) => unknown>;

/** The worker side: answers calls with `handlers`; `push` sends an event to the test. Exits when stdin closes. */
export function serveWorker(handlers: WorkerHandlers): { push(event: string, data?: unknown): void } {
  const write = (reply: Reply): void => void process.stdout.write(JSON.stringify(reply) + "\n");
  const lines = createInterface({ input: process.stdin });
  lines.on("line", (line) => {
    const { id, method, params } = JSON.parse(line) as { id: number; method: string; params: never };
    const handler = handlers[method];
    Promise.resolve()
      .then(() => {
        if (!handler) throw new Error(`unknown worker method ${method}`);
        return handler(params);
      })
      .then(
        (result) => write({ id, result: result ?? null }),
        (error: unknown) => write({ id, error: error instanceof Error ? error.message : String(error) }),
      );
  });
  lines.once("close", () => process.exit(0));
  return { push: (event, data) => write({ event, data: data ?? null }) };
}

/** Asks each worker to `close` (failures ignored: it may be dead already), then stops it. */
export async function closeWorkers(workers: readonly Worker[]): Promise<void> {
  await Promise.all(
    workers.map((w) =>
      w
        .call("close")
        .then(noop, noop)
        .then(() => w.stop()),
    ),
  );
}

const noop = (): void => undefined;
