import { SandboxAgentHttpError, type Processes } from "sandbox-agent";
import type { SandboxProcess } from "./types.js";

const STDERR_TAIL_BYTES = 64 * 1024;
/** stdout buffered ahead of the reader, like a pipe's buffer: a process with little output exits unread. */
const STDOUT_BUFFER_BYTES = 64 * 1024;

export interface RemoteSpawnOptions {
  cwd: string;
  env: Record<string, string>;
}

/** Swallows "the process is gone or its stdin closed" (409/404); rethrows anything else. */
function ignoreGone(error: unknown): void {
  if (!(error instanceof SandboxAgentHttpError) || (error.status !== 409 && error.status !== 404))
    throw error;
}

/** Keeps the last `limit` bytes of stderr as text. */
class Tail {
  private text = "";
  private readonly decoder = new TextDecoder();

  push(bytes: Uint8Array): void {
    this.text = (this.text + this.decoder.decode(bytes, { stream: true })).slice(-STDERR_TAIL_BYTES);
  }

  toString(): string {
    return this.text;
  }
}

/**
 * Runs `command` with `/bin/sh -c` through a sandbox-agent server's process API: stdin writes are
 * input requests (each resolves once the remote pipe took the bytes), stdout and stderr come from
 * following the process' logs, which resumes by itself after a dropped connection. stdout is read
 * ahead at most a pipe's worth, so a reader that stops reading holds the remote process back.
 */
export async function spawnRemote(
  processes: Processes,
  command: string,
  options: RemoteSpawnOptions,
): Promise<SandboxProcess> {
  const info = await processes.create({ command: "/bin/sh", args: ["-c", command], ...options });
  const events = processes.logs(info.id, { follow: true });
  const stderr = new Tail();
  let output!: ReadableStreamDefaultController<Uint8Array>;
  let wakeReader: (() => void) | undefined;
  // A reader that cancels stdout still gets `exited`: the output is then followed and dropped.
  let cancelled = false;
  const stdout = new ReadableStream<Uint8Array>(
    {
      start: (controller) => void (output = controller),
      pull: () => wakeReader?.(),
      cancel: () => {
        cancelled = true;
        wakeReader?.();
      },
    },
    new ByteLengthQueuingStrategy({ highWaterMark: STDOUT_BUFFER_BYTES }),
  );
  const exited = (async (): Promise<{ code: number | null; signal: string | null }> => {
    let exit = { code: null as number | null, signal: null as string | null };
    try {
      for await (const event of events) {
        if (event.type === "exit") {
          exit = { code: event.exitCode, signal: event.signal };
          break;
        }
        if (event.stream === "stderr") stderr.push(event.data);
        else if (!cancelled) output.enqueue(event.data);
        if (!cancelled && (output.desiredSize ?? 1) <= 0)
          await new Promise<void>((resolve) => (wakeReader = resolve));
      }
      if (!cancelled) output.close();
    } catch (error) {
      stderr.push(new TextEncoder().encode(`\n[sandbox-agent: lost the process output: ${String(error)}]\n`));
      if (!cancelled) output.error(error);
    }
    // Exited and read: nothing is left to keep on the server.
    void processes.remove(info.id).catch(() => undefined);
    return exit;
  })();
  let killing: Promise<void> | undefined;
  return {
    pid: info.pid,
    stdin: new WritableStream<Uint8Array>({
      write: async (chunk) => void (await processes.input(info.id, chunk)),
      // Closing the stdin of a process that already exited is fine, as with a local pipe.
      close: () => processes.input(info.id, "", { eof: true }).then(() => undefined, ignoreGone),
    }),
    stdout,
    stderrTail: () => stderr.toString(),
    exited,
    kill: () =>
      (killing ??= (async () => {
        // SIGTERM, SIGKILL after the server's grace period; answered once the process is gone.
        await processes.stop(info.id).catch(() => undefined);
        await processes.remove(info.id).catch(() => undefined);
      })()),
  };
}
