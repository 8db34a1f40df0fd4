import { accessSync, constants, statSync } from "node:fs";
import path from "node:path";

/** Why the process API refused a request; the HTTP routes and the ACP handlers map each kind. */
export type ProcessErrorKind =
  | "command-not-found"
  | "not-executable"
  | "bad-cwd"
  | "tty-unavailable"
  | "too-many-processes"
  | "shutting-down"
  | "unknown-process"
  | "process-exited"
  | "stdin-closed"
  | "not-a-terminal";

/** A refusal the caller can act on (a 4xx, not a 500); the message says what to do. */
export class ProcessError extends Error {
  constructor(
    readonly kind: ProcessErrorKind,
    message: string,
  ) {
    super(message);
  }
}

// The lookups below are synchronous on purpose: a few metadata reads of local paths take
// microseconds, while each asynchronous one is a thread-pool round trip (measured: resolving
// `true` on an 11-entry PATH, 0.15 ms sync against 0.9-2.2 ms async), and `run` answers in a few ms.

export function checkDirectory(cwd: string): void {
  const info = statSync(cwd, { throwIfNoEntry: false });
  if (!info?.isDirectory()) throw new ProcessError("bad-cwd", `The working directory ${cwd} does not exist.`);
}

/**
 * The executable `command` names, looked up in `PATH` like a shell does (a name with a `/` is a
 * path relative to `cwd`), so a missing program is a clear 4xx before anything is started.
 */
export function resolveCommand(command: string, pathVariable: string, cwd: string): string {
  const candidates = command.includes("/")
    ? [path.resolve(cwd, command)]
    : pathVariable
        .split(":")
        .filter(Boolean)
        .map((dir) => path.resolve(cwd, dir, command));
  let found: string | undefined;
  for (const candidate of candidates) {
    if (!statSync(candidate, { throwIfNoEntry: false })?.isFile()) continue;
    if (isExecutable(candidate)) return candidate;
    found ??= candidate;
  }
  if (found !== undefined) throw new ProcessError("not-executable", `${found} is not executable.`);
  const where = command.includes("/") ? "" : " on PATH";
  throw new ProcessError("command-not-found", `Command not found${where}: ${JSON.stringify(command)}.`);
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
