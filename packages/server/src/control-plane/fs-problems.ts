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
  switch (errnoOf(error)) {
    case "ENOENT":
      return notFound(display);
    case "EEXIST":
      return alreadyExists(display);
    case "ENOTDIR":
      // A parent is a file, so the path cannot exist.
      return problems.notFound(`${display} does not exist (a parent is not a directory).`);
    case "EISDIR":
      return isADirectory(display);
    case "ENOTEMPTY":
      return new ProblemError(409, "not-empty", "Directory Not Empty", `${display} is not empty.`);
    case "EACCES":
    case "EPERM":
      return problems.forbidden(`Permission denied on ${display}.`);
    case "EINVAL":
    case "ENAMETOOLONG":
      return problems.badRequest(`Invalid path operation on ${display}.`);
    case "ENOSPC":
      return new ProblemError(
        507,
        "insufficient-storage",
        "Insufficient Storage",
        "No space left on device.",
      );
    default:
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
