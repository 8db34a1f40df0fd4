import type { SandboxProcess } from "@sandbox-agent/ai-sandbox";

/** How often stderr (kept only as a tail by sandbox processes) is searched for the ready marker. */
const STDERR_CHECK_MS = 50;

export interface WaitForOutputOptions {
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  /** Also search stderr (agents often log there). */
  stderr?: boolean;
  /** What is being started, for error messages. */
  what: string;
}

/**
 * Reads `proc`'s stdout (and stderr when asked) until `find` returns a value; keeps draining
 * stdout afterwards so a chatty server never blocks on a full pipe. Rejects when the process
 * exits first, on timeout and on abort, with its stderr tail.
 */
export async function waitForOutput<T>(
  proc: SandboxProcess,
  find: (output: string) => T | undefined,
  options: WaitForOutputOptions,
): Promise<T> {
  const reader = proc.stdout.getReader();
  const decoder = new TextDecoder();
  const tail = () => proc.stderrTail().slice(-2000);
  const timers: Array<ReturnType<typeof setTimeout>> = [];
  let settled = false;
  let onAbort: (() => void) | undefined;
  const ready = new Promise<T>((resolve, reject) => {
    const fail = (message: string) => reject(new Error(`${options.what} ${message}`));
    timers.push(
      setTimeout(() => fail(`not ready after ${options.timeoutMs} ms: ${tail()}`), options.timeoutMs),
    );
    onAbort = () => fail("start aborted");
    if (options.signal?.aborted) onAbort();
    options.signal?.addEventListener("abort", onAbort, { once: true });
    void proc.exited.then(({ code, signal }) =>
      fail(`exited before ready (code ${code}, signal ${signal}): ${tail()}`),
    );
    if (options.stderr) {
      const check = () => {
        const found = settled ? undefined : find(proc.stderrTail());
        if (found !== undefined) resolve(found);
        else if (!settled) timers.push(setTimeout(check, STDERR_CHECK_MS));
      };
      check();
    }
    // Reads stdout to the end: searched until ready, then discarded so the pipe never fills.
    void (async () => {
      let buffered = "";
      for (;;) {
        const chunk = await reader.read();
        // Closed stdout is no failure: the marker may come on stderr; exit and timeout end the wait.
        if (chunk.done) return;
        if (settled) continue;
        buffered += decoder.decode(chunk.value, { stream: true });
        const found = find(buffered);
        if (found !== undefined) resolve(found);
      }
    })().catch(() => fail(`stdout failed: ${tail()}`));
  });
  try {
    return await ready;
  } catch (error) {
    void reader.cancel().catch(() => undefined);
    throw error;
  } finally {
    settled = true;
    for (const timer of timers) clearTimeout(timer);
    if (onAbort) options.signal?.removeEventListener("abort", onAbort);
  }
}
