export type LogLevel = "debug" | "info" | "warn" | "error";
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** Line-oriented logger on stderr: `time level message key=value…`. */
export function createLogger(
  level: LogLevel,
  write: (line: string) => void = (l) => process.stderr.write(l),
): Logger {
  const emit =
    (at: LogLevel) =>
    (message: string, fields: Record<string, unknown> = {}) => {
      if (ORDER[at] < ORDER[level]) return;
      const rest = Object.entries(fields)
        .map(([k, v]) => `${k}=${serialize(v)}`)
        .join(" ");
      write(`${new Date().toISOString()} ${at} ${message}${rest ? " " + rest : ""}\n`);
    };
  return { debug: emit("debug"), info: emit("info"), warn: emit("warn"), error: emit("error") };
}

/** A field value as JSON; logging must never throw (a value too deep for JSON.stringify is a RangeError). */
function serialize(value: unknown): string {
  try {
    return JSON.stringify(value ?? null);
  } catch {
    return '"[unserializable]"';
  }
}

/** Connection ids are capabilities: log only a prefix. */
export function shortId(id: string): string {
  return id.slice(0, 8);
}
