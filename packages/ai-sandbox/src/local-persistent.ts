import { appendFileSync, readFileSync } from "node:fs";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { stopGroup } from "./process.js";
import type {
  PersistentSandboxProvider,
  ProviderCreateRequest,
  ProviderInstance,
  SandboxProvider,
} from "./provider.js";

/** Written when the sandbox is created; its presence is what `resume` looks for. */
const MARKER = "sandbox.json";
/** One line per process group the sandbox started: `<pgid> <start time>`, for `stop` from any process. */
const GROUPS = "process-groups";

/** How `localProcessSandbox` opens an instance on a given directory. */
export type OpenLocal = (
  request: ProviderCreateRequest,
  placement: { root: string; onSpawn: (pgid: number) => void },
) => Promise<ProviderInstance>;

/**
 * The local provider's persistent mode: the sandbox of id X is the directory `<parentDir>/X`, found
 * again by id from any process on this machine. Stopping kills the process groups the sandbox started
 * (recorded in the directory, each checked against its start time so a recycled pid is never hit) and
 * keeps the files; resuming opens the same directory again. `launched`: commands run under a launcher
 * (bwrap) that leads their process group (see `stopGroup`).
 */
export function persistentLocal(
  base: SandboxProvider,
  parentDir: string,
  open: OpenLocal,
  launched = false,
): PersistentSandboxProvider {
  const dirOf = (id: string): string => join(resolve(parentDir), safeId(id));
  const place = (root: string) => ({ root, onSpawn: (pgid: number) => recordGroup(root, pgid) });
  const stop = async (id: string): Promise<void> => {
    const root = dirOf(id);
    const groups = await readFile(join(root, GROUPS), "utf8").catch(() => "");
    await Promise.all(
      groups
        .split("\n")
        .filter(Boolean)
        .map((line) => line.split(" ").map(Number) as [number, number])
        .filter(([pgid, started]) => startTime(pgid) === started)
        .map(([pgid]) => stopGroup(pgid, undefined, launched)),
    );
    await writeFile(join(root, GROUPS), "").catch(() => undefined);
  };
  return {
    name: base.name,
    create: async (request) => {
      const root = dirOf(request.id);
      await mkdir(root, { recursive: true });
      const marker = JSON.stringify({
        id: request.id,
        createdAt: new Date().toISOString(),
        pid: process.pid,
      });
      await writeFile(join(root, MARKER), marker, { flag: "wx" }).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== "EEXIST") throw error;
        throw new Error(
          `local sandbox "${request.id}" already exists in ${root}: resume it, or destroy it first`,
        );
      });
      return open(request, place(root));
    },
    resume: async (request) => {
      const root = dirOf(request.id);
      const exists = await readFile(join(root, MARKER)).then(
        () => true,
        () => false,
      );
      return exists ? open(request, place(root)) : undefined;
    },
    stop,
    destroy: async (id) => {
      await stop(id);
      await rm(dirOf(id), { recursive: true, force: true });
    },
  };
}

function safeId(id: string): string {
  if (!/^[A-Za-z0-9._-]+$/.test(id) || id === "." || id === "..") {
    throw new TypeError(`local sandbox id "${id}" must be letters, digits, ".", "_" or "-"`);
  }
  return id;
}

function recordGroup(root: string, pgid: number): void {
  const started = startTime(pgid);
  // Synchronous on purpose: the line must be there before anyone can ask this sandbox to stop.
  if (started !== undefined) appendFileSync(join(root, GROUPS), `${pgid} ${started}\n`);
}

/** The process's start time in clock ticks since boot (Linux `/proc`); undefined when it is gone. */
function startTime(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name, which may itself hold spaces and parentheses.
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]);
  } catch {
    return undefined;
  }
}
