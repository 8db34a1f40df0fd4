import { constants } from "node:fs";
import { access, stat } from "node:fs/promises";
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

export async function checkDirectory(cwd: string): Promise<void> {
  const info = await stat(cwd).catch(() => undefined);
  if (!info?.isDirectory()) throw new ProcessError("bad-cwd", `The working directory ${cwd} does not exist.`);
}

/**
 * The executable `command` names, looked up in `PATH` like a shell does (a name with a `/` is a
 * path relative to `cwd`), so a missing program is a clear 4xx before anything is started.
 */
export async function resolveCommand(command: string, pathVariable: string, cwd: string): Promise<string> {
  const candidates = command.includes("/")
    ? [path.resolve(cwd, command)]
    : pathVariable
        .split(":")
        .filter(Boolean)
        .map((dir) => path.resolve(cwd, dir, command));
  let found: string | undefined;
  for (const candidate of candidates) {
    const info = await stat(candidate).catch(() => undefined);
    if (!info?.isFile()) continue;
    if (await isExecutable(candidate)) return candidate;
    found ??= candidate;
  }
  if (found !== undefined) throw new ProcessError("not-executable", `${found} is not executable.`);
  const where = command.includes("/") ? "" : " on PATH";
  throw new ProcessError("command-not-found", `Command not found${where}: ${JSON.stringify(command)}.`);
}

function isExecutable(file: string): Promise<boolean> {
  return access(file, constants.X_OK).then(
    () => true,
    () => false,
  );
}
