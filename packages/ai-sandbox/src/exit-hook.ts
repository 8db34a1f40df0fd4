const cleanups = new Set<() => void>();
const SIGNALS: readonly NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];
let installed = false;

function runAll(): void {
  for (const cleanup of cleanups) {
    try {
      cleanup();
    } catch {
      // Keep going: one failing cleanup must not leave the other sandboxes behind.
    }
  }
  cleanups.clear();
}

/**
 * Node skips 'exit' handlers when a signal kills the process, so signals are hooked too. When
 * nobody else handles the signal we re-raise it after cleanup, keeping the default behaviour
 * (exit by that signal); otherwise the other handlers decide.
 */
function onSignal(signal: NodeJS.Signals): void {
  runAll();
  if (process.listenerCount(signal) === 1) {
    process.removeListener(signal, onSignal);
    process.kill(process.pid, signal);
  }
}

/** Registers synchronous cleanup for host process exit; returns the unregister function. */
export function onProcessExit(cleanup: () => void): () => void {
  if (!installed) {
    process.once("exit", runAll);
    for (const signal of SIGNALS) process.on(signal, onSignal);
    installed = true;
  }
  cleanups.add(cleanup);
  return () => cleanups.delete(cleanup);
}
