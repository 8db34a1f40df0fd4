import { randomBytes } from "node:crypto";
import { PassThrough, Readable, type Duplex } from "node:stream";
import type Docker from "dockerode";
import { shellQuote, TailBuffer, type SandboxProcess } from "@sandbox-agent/ai-sandbox";

const KILL_GRACE_MS = 2000;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Runs inside the container as `sh -c WRAPPER sandbox-exec END COMMAND`. It reports its pid on
 * stderr (`docker exec` makes each process a session and group leader, so the pid is the group to
 * signal), reads `export NAME='value'` lines from stdin up to the line END, and runs COMMAND with
 * them. The environment thus travels in the attached stdin stream: it is never part of the
 * container's or the exec's configuration, which the engine keeps and shows (`docker inspect`).
 */
const WRAPPER = `printf '%s\\n' "$$" >&2
e=$1; c=$2; s=; ok=
while IFS= read -r l; do
  if [ "$l" = "$e" ]; then ok=1; break; fi
  s="$s$l
"
done
[ -n "$ok" ] || exit 125
eval "$s"
unset e s l ok
exec /bin/sh -c "$c"`;

function envHeader(env: Record<string, string>, end: string): string {
  const lines = Object.entries(env).map(([name, value]) => {
    if (!ENV_NAME.test(name)) throw new TypeError(`invalid environment variable name "${name}"`);
    return `export ${name}=${shellQuote(value)}\n`;
  });
  return `${lines.join("")}${end}\n`;
}

const SIGNALS: Record<number, string> = {
  1: "SIGHUP",
  2: "SIGINT",
  9: "SIGKILL",
  15: "SIGTERM",
  6: "SIGABRT",
};

/** `docker exec` reports a process killed by signal N as exit code 128 + N, as shells do. */
function exitStatus(code: number | null): { code: number | null; signal: string | null } {
  if (code !== null && code > 128 && code - 128 in SIGNALS)
    return { code: null, signal: SIGNALS[code - 128]! };
  return { code, signal: null };
}

export interface ExecOptions {
  cwd: string;
  env: Record<string, string>;
}

/** A shell command running in `container` through `docker exec`, with its stdio attached. */
export async function execInContainer(
  docker: Docker,
  container: Docker.Container,
  command: string,
  options: ExecOptions,
): Promise<SandboxProcess> {
  const end = `__sandbox_env_end_${randomBytes(12).toString("hex")}__`;
  const exec = await container.exec({
    Cmd: ["/bin/sh", "-c", WRAPPER, "sandbox-exec", end, command],
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    WorkingDir: options.cwd,
  });
  const socket = (await exec.start({ hijack: true, stdin: true })) as Duplex;
  socket.on("error", () => undefined);
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  docker.modem.demuxStream(socket, stdout, stderr);
  socket.write(envHeader(options.env, end));

  const tail = new TailBuffer();
  const pid = firstLine(stderr, tail);
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      stdout.end();
      stderr.end();
      void (async () => {
        const status = await exec.inspect().then(
          (info) => exitStatus(info.ExitCode ?? null),
          // The container is gone (removed): no exit code to read.
          () => ({ code: null, signal: "SIGKILL" }),
        );
        if (status.code === null) tail.push(Buffer.from(await containerNote(container)));
        resolve(status);
      })();
    };
    socket.once("end", finish);
    socket.once("close", finish);
  });
  const group = await Promise.race([pid, exited.then(() => undefined)]);

  let killing: Promise<void> | undefined;
  const signal = async (name: "TERM" | "KILL") => {
    if (group === undefined) return;
    const killer = await container.exec({
      Cmd: ["/bin/sh", "-c", `kill -${name} -${group} 2>/dev/null || kill -${name} ${group} 2>/dev/null`],
      AttachStdout: true,
      AttachStderr: true,
    });
    const out = (await killer.start({})) as Readable;
    out.resume();
    await new Promise((resolve) => out.once("close", resolve).once("end", resolve));
  };
  const kill = (): Promise<void> => {
    killing ??= (async () => {
      const gone = (ms: number) =>
        Promise.race([exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
      if (await gone(0)) return;
      await signal("TERM").catch(() => undefined);
      if (await gone(KILL_GRACE_MS)) return;
      await signal("KILL").catch(() => undefined);
      if (!(await gone(KILL_GRACE_MS))) socket.destroy();
    })();
    return killing;
  };

  return {
    pid: group,
    stdin: new WritableStream<Uint8Array>({
      write: (chunk) =>
        new Promise<void>((resolve, reject) =>
          socket.write(chunk, (error) => (error ? reject(error) : resolve())),
        ),
      // Half-closes the attach connection: the engine closes the process's stdin.
      close: () => void socket.end(),
      abort: () => void socket.end(),
    }),
    stdout: Readable.toWeb(stdout) as ReadableStream<Uint8Array>,
    stderrTail: () => tail.toString(),
    exited,
    kill,
  };
}

/** Says so in the stderr tail when a process ended because its whole container stopped. */
async function containerNote(container: Docker.Container): Promise<string> {
  try {
    const { State: state } = await container.inspect();
    if (state.Running) return "";
    const oom = state.OOMKilled ? ", out of memory" : "";
    return `\n[sandbox] the container stopped (exit code ${state.ExitCode}${oom}): the process was killed with it\n`;
  } catch {
    return "\n[sandbox] the container is gone (removed): the process was killed with it\n";
  }
}

/** Resolves the wrapper's pid line; everything after it goes to `tail`. */
function firstLine(stderr: PassThrough, tail: TailBuffer): Promise<number | undefined> {
  return new Promise((resolve) => {
    let pending = Buffer.alloc(0);
    let found = false;
    stderr.on("data", (chunk: Buffer) => {
      if (found) return tail.push(chunk);
      pending = Buffer.concat([pending, chunk]);
      const nl = pending.indexOf(10);
      if (nl === -1) return;
      found = true;
      const pid = Number(pending.subarray(0, nl).toString("utf8"));
      resolve(Number.isInteger(pid) && pid > 0 ? pid : undefined);
      if (nl + 1 < pending.length) tail.push(pending.subarray(nl + 1));
    });
    stderr.once("end", () => {
      if (!found) {
        tail.push(pending);
        resolve(undefined);
      }
    });
  });
}
