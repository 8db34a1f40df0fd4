/**
 * Calls a user callback. Its exception must not break message delivery, so it
 * is rethrown outside our call stack, as EventTarget listeners' errors are.
 */
export function callSafely<T>(listener: (value: T) => void, value: T): void {
  try {
    listener(value);
  } catch (error) {
    queueMicrotask(() => {
      throw error;
    });
  }
}
