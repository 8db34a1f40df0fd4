import { ProblemError, problems } from "../http/problem.js";

export function errnoOf(error: unknown): string | undefined {
  return error instanceof Error && "code" in error ? String(error.code) : undefined;
}

export function notADirectory(display: string): ProblemError {
  return new ProblemError(409, "not-a-directory", "Not A Directory", `${display} is not a directory.`);
}

export function notAFile(display: string): ProblemError {
  return new ProblemError(409, "not-a-file", "Not A Regular File", `${display} is not a regular file.`);
}

export function alreadyExists(display: string): ProblemError {
  return new ProblemError(409, "already-exists", "Already Exists", `${display} already exists.`);
}

export function isADirectory(display: string): ProblemError {
  return new ProblemError(409, "is-a-directory", "Is A Directory", `${display} is a directory.`);
}

export function notFound(display: string): ProblemError {
  return problems.notFound(`${display} does not exist.`);
}

/** Maps a Node filesystem error on `display` to the problem the client should see. */
export function fsProblem(error: unknown, display: string): unknown {
  if (error instanceof ProblemError) return error;
  const code = errnoOf(error);
  switch (code) {
    case "ENOENT":
      return notFound(display);
    case "EEXIST":
      return alreadyExists(display);
    case "ENOTDIR":
      // A parent is a file, so the path cannot exist.
      return problems.notFound(`${display} does not exist (a parent is not a directory).`);
    case "EISDIR":
      return isADirectory(display);
    case "ENXIO":
      // Opening a socket, or a device without a driver.
      return notAFile(display);
    case "ENOTEMPTY":
      return new ProblemError(409, "not-empty", "Directory Not Empty", `${display} is not empty.`);
    case "EBUSY":
    case "ETXTBSY":
      return new ProblemError(
        409,
        "busy",
        "Busy",
        `${display} is in use (a mount point or a running program).`,
      );
    case "EACCES":
    case "EPERM":
      return problems.forbidden(`Permission denied on ${display}.`);
    case "EROFS":
      return problems.forbidden(`${display} is on a read-only filesystem.`);
    case "ELOOP":
      return problems.badRequest(`Too many levels of symbolic links in ${display}.`);
    case "ENAMETOOLONG":
      return problems.badRequest(`${display} is too long (a name or the whole path).`);
    case "EINVAL":
      return problems.badRequest(`Invalid path operation on ${display}.`);
    case "ENOSPC":
    case "EDQUOT":
      return new ProblemError(
        507,
        "insufficient-storage",
        "Insufficient Storage",
        "No space left on device.",
      );
    case "EMFILE":
    case "ENFILE":
      return new ProblemError(
        503,
        "too-many-open-files",
        "Service Unavailable",
        "The server has too many open files right now; retry shortly.",
        {},
        { "retry-after": "1" },
      );
    case "ECONNRESET":
    case "ERR_STREAM_PREMATURE_CLOSE":
      return problems.badRequest("The request body ended before it was complete.");
    default:
      // Other system errors (EIO, …): say which, but never the host path in their message.
      if (code !== undefined && /^E[A-Z0-9]+$/.test(code)) {
        return new ProblemError(
          500,
          "filesystem-error",
          "Filesystem Error",
          `The filesystem failed on ${display} (${code}).`,
        );
      }
      return error;
  }
}

/** Runs `op`, translating filesystem errors into problems about `display`. */
export async function onPath<T>(display: string, op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (error) {
    throw fsProblem(error, display);
  }
}
