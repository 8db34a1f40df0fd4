export type LogLevel = "debug" | "info" | "warn" | "error";
/** `text`: `time level message key=value…`; `json`: one object per line (`time`, `level`, `msg`, fields). */
export type LogFormat = "text" | "json";
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  /** Whether entries at `level` are written (a logger without it: assume they are). */
  enabled?(level: LogLevel): boolean;
}

/** Line-oriented logger (stderr by default): one line per entry, in `format`. */
export function createLogger(
  level: LogLevel,
  write: (line: string) => void = (l) => process.stderr.write(l),
  format: LogFormat = "text",
): Logger {
  const line = format === "json" ? jsonLine : textLine;
  const emit =
    (at: LogLevel) =>
    (message: string, fields: Record<string, unknown> = {}) => {
      if (ORDER[at] < ORDER[level]) return;
      write(line(new Date().toISOString(), at, message, fields));
    };
  return {
    debug: emit("debug"),
    info: emit("info"),
    warn: emit("warn"),
    error: emit("error"),
    enabled: (at) => ORDER[at] >= ORDER[level],
  };
}

function textLine(time: string, level: LogLevel, message: string, fields: Record<string, unknown>): string {
  const rest = Object.entries(fields)
    .map(([k, v]) => `${k}=${serialize(v)}`)
    .join(" ");
  return `${time} ${level} ${message}${rest ? " " + rest : ""}\n`;
}

/** One JSON object per line; fields never replace `time`, `level` or `msg`. */
function jsonLine(time: string, level: LogLevel, msg: string, fields: Record<string, unknown>): string {
  const entry: Record<string, unknown> = { time, level, msg };
  for (const [key, value] of Object.entries(fields)) if (!(key in entry)) entry[key] = value;
  try {
    return JSON.stringify(entry) + "\n";
  } catch {
    const parts = Object.entries(entry).map(([k, v]) => `${JSON.stringify(k)}:${serialize(v)}`);
    return `{${parts.join(",")}}\n`;
  }
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
