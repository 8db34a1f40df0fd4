/**
 * ACP client methods (`fs/read_text_file`, `fs/write_text_file`, `terminal/*`) answered by the
 * server inside the sandbox, for connections that asked for it (see `client-capabilities.ts`).
 * Files are confined to the filesystem API's root and reached the way that API reaches them
 * (through `FsRoot`'s verified descriptors, so a symlink swapped in meanwhile cannot lead outside);
 * terminals are processes of the process API.
 */
import { constants } from "node:fs";
import path from "node:path";
import { Readable } from "node:stream";
import { pathEscape, resolveInRoot, type RootedPath } from "../control-plane/fs-paths.js";
import { isADirectory, notAFile, onPath } from "../control-plane/fs-problems.js";
import type { FsRoot } from "../control-plane/fs-root.js";
import { receiveFile } from "../control-plane/fs-transfer.js";
import { ProblemError } from "../http/problem.js";
import { ProcessError } from "../processes/command.js";
import type { ProcessManager } from "../processes/manager.js";
import type { ManagedProcess } from "../processes/managed-process.js";
import { RpcError } from "./methods.js";
import type { clientRequestParams } from "./param-schemas.js";
import { loadParamSchemas } from "./params.js";
import { ERRORS } from "../protocol.js";

export interface ClientRequestDeps {
  processes: ProcessManager;
  /** Root of the filesystem API: as configured (agents may name paths under either) and opened. */
  fsRoot: { configured: string; root: FsRoot };
  /** Default working directory of terminals. */
  workdir: string;
}

/** The terminals one connection's agent created; released with the connection. */
export type TerminalTable = Map<string, { proc: ManagedProcess; outputByteLimit: number }>;

/** Largest file `fs/read_text_file` reads. */
const MAX_READ_BYTES = 64 * 1024 * 1024;
/** `terminal/output` keeps this much when the agent names no `outputByteLimit`. */
const DEFAULT_OUTPUT_LIMIT = 1024 * 1024;

export type ClientMethod = keyof typeof clientRequestParams;
type Params<M extends ClientMethod> = import("zod").output<(typeof clientRequestParams)[M]>;

export const FS_METHODS: readonly ClientMethod[] = ["fs/read_text_file", "fs/write_text_file"];
export const TERMINAL_METHODS: readonly ClientMethod[] = [
  "terminal/create",
  "terminal/output",
  "terminal/wait_for_exit",
  "terminal/kill",
  "terminal/release",
];

type Handlers = { [M in ClientMethod]: (params: Params<M>, terminals: TerminalTable) => Promise<unknown> };

export type ClientRequestAnswerer = (
  method: ClientMethod,
  params: unknown,
  terminals: TerminalTable,
) => Promise<unknown>;

/** Answers client methods; the returned function throws `RpcError` for the error the agent should get. */
export function clientRequestAnswerer(deps: ClientRequestDeps): ClientRequestAnswerer {
  const table = handlers(deps);
  return async (method, params, terminals) => {
    const { clientRequestParams: schemas, issuesOf } = await loadParamSchemas();
    const parsed = schemas[method].safeParse(params);
    if (!parsed.success)
      throw new RpcError(ERRORS.invalidParams, `Invalid params for ${method}`, {
        issues: issuesOf(parsed.error),
      });
    const handler = table[method] as (p: unknown, t: TerminalTable) => Promise<unknown>;
    try {
      return await handler(parsed.data, terminals);
    } catch (error) {
      throw rpcErrorOf(error);
    }
  };
}

function handlers(deps: ClientRequestDeps): Handlers {
  return {
    "fs/read_text_file": async ({ path: file, line, limit }) => {
      const content = await readText(deps.fsRoot.root, await confined(deps, file));
      return { content: selectLines(content, line ?? undefined, limit ?? undefined) };
    },
    "fs/write_text_file": async ({ path: file, content }) => {
      // Written like an upload: a temp file beside the target renamed over it, so the agent's
      // editor never leaves a half-written file; missing parents are created.
      const source = Readable.from([Buffer.from(content, "utf8")]);
      await receiveFile(deps.fsRoot.root, source, await confined(deps, file), {
        overwrite: true,
        parents: true,
      });
      return {};
    },
    "terminal/create": async (params, terminals) => {
      // Through the shell, as editors' terminals do: a command line without args works, and
      // stderr shares stdout's pipe so the output keeps the order it was written in.
      const args =
        params.args && params.args.length > 0
          ? ["-c", 'exec 2>&1; exec "$0" "$@"', params.command, ...params.args]
          : ["-c", `exec 2>&1\n${params.command}`];
      const proc = await deps.processes.create({
        command: "/bin/sh",
        args,
        cwd: params.cwd ?? deps.workdir,
        env: Object.fromEntries((params.env ?? []).map((v) => [v.name, v.value])),
        source: "acp",
      });
      terminals.set(proc.id, { proc, outputByteLimit: params.outputByteLimit ?? DEFAULT_OUTPUT_LIMIT });
      return { terminalId: proc.id };
    },
    "terminal/output": async ({ terminalId }, terminals) => {
      const { proc, outputByteLimit } = terminal(terminals, terminalId);
      return { ...proc.combinedOutput(outputByteLimit), exitStatus: proc.exit ?? null };
    },
    "terminal/wait_for_exit": async ({ terminalId }, terminals) =>
      terminal(terminals, terminalId).proc.exited,
    "terminal/kill": async ({ terminalId }, terminals) => {
      await terminal(terminals, terminalId).proc.kill();
      return {};
    },
    "terminal/release": async ({ terminalId }, terminals) => {
      terminal(terminals, terminalId);
      terminals.delete(terminalId);
      await deps.processes.remove(terminalId);
      return {};
    },
  };
}

function terminal(terminals: TerminalTable, id: string) {
  const entry = terminals.get(id);
  if (!entry)
    throw new RpcError(ERRORS.resourceNotFound, `Unknown terminal ${id} (never created here, or released).`);
  return entry;
}

/**
 * `file` (absolute, as the agent sees the sandbox) as a path of the filesystem root, with the same
 * symlink checks as the filesystem API; errors name the path as the agent gave it.
 */
async function confined(deps: ClientRequestDeps, file: string): Promise<RootedPath> {
  const { configured, root } = deps.fsRoot;
  const relative = [path.relative(configured, file), path.relative(root.path, file)].find(
    (rel) => !rel.startsWith("..") && !path.isAbsolute(rel),
  );
  if (relative === undefined) throw pathEscape(file);
  return { ...(await resolveInRoot(root.path, `/${relative}`, { follow: true })), display: file };
}

/** A regular file's text, read through a descriptor of the very file the root check pinned. */
async function readText(root: FsRoot, target: RootedPath): Promise<string> {
  // O_NONBLOCK so that opening a FIFO cannot hang the agent; regular files ignore it.
  const handle = await onPath(target.display, () =>
    root.with(target.absolute, target.display, {}, (pinned) =>
      pinned.reopen(constants.O_RDONLY | constants.O_NONBLOCK),
    ),
  );
  try {
    const info = await handle.stat();
    if (info.isDirectory()) throw isADirectory(target.display);
    if (!info.isFile()) throw notAFile(target.display);
    if (info.size > MAX_READ_BYTES)
      throw new RpcError(
        ERRORS.internal,
        `${target.display} is ${info.size} bytes; at most ${MAX_READ_BYTES} are read.`,
      );
    return await onPath(target.display, () => handle.readFile("utf8"));
  } finally {
    await handle.close();
  }
}

/** ACP `line` (1-based) and `limit` (lines) of `content`. */
function selectLines(content: string, line: number | undefined, limit: number | undefined): string {
  if (line === undefined && limit === undefined) return content;
  const lines = content.split("\n");
  const start = (line ?? 1) - 1;
  return lines.slice(start, limit === undefined ? undefined : start + limit).join("\n");
}

/** JSON-RPC errors for problems of the filesystem and process layers. */
function rpcErrorOf(error: unknown): unknown {
  if (error instanceof RpcError) return error;
  if (error instanceof ProblemError) {
    const { status, detail, type } = error.problem;
    const code =
      status === 404 ? ERRORS.resourceNotFound : status === 400 ? ERRORS.invalidParams : ERRORS.internal;
    return new RpcError(code, detail, { status, type });
  }
  if (error instanceof ProcessError) {
    const invalid = ["command-not-found", "not-executable", "bad-cwd"].includes(error.kind);
    return new RpcError(invalid ? ERRORS.invalidParams : ERRORS.internal, error.message, {
      kind: error.kind,
    });
  }
  return error;
}
