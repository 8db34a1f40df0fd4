import type { StopReason, ToolKind } from "@agentclientprotocol/sdk";

/** One parsed line of a prompt script. See the README for the language. */
export type ScriptCommand =
  | { name: "echo"; text: string }
  | { name: "chunks"; count: number; text: string | undefined }
  | { name: "think"; text: string }
  | { name: "tool"; kind: ToolKind; title: string }
  | { name: "fail-tool"; title: string }
  | { name: "plan"; entries: string[] }
  | { name: "permission"; title: string }
  | { name: "write"; path: string; content: string }
  | { name: "read"; path: string }
  | { name: "fs-write"; path: string; content: string }
  | { name: "terminal"; line: string }
  | { name: "terminal-kill"; line: string }
  | { name: "sleep"; ms: number }
  | { name: "slow"; count: number; ms: number }
  | { name: "crash"; code: number }
  | { name: "hang" }
  | { name: "close-stdout" }
  | { name: "garbage"; text: string }
  | { name: "stderr"; bytes: number }
  | { name: "bigline"; bytes: number }
  | { name: "stop"; reason: StopReason }
  | { name: "error"; code: number; message: string }
  | { name: "image" }
  | { name: "messages" }
  | { name: "unknown-update" }
  | { name: "ext"; method: string; params: unknown }
  | { name: "ext-request"; method: string; params: unknown }
  | { name: "meta" }
  | { name: "env"; variable: string }
  | { name: "json"; text: string }
  | { name: "mcp"; tool: string; args: Record<string, unknown> }
  | { name: "mcp-list" }
  | { name: "usage"; used: number | undefined }
  | { name: "turn-usage"; input: number; output: number; thought: number | undefined }
  | { name: "title"; title: string }
  | { name: "commands" }
  | { name: "blocks" };

export type CommandName = ScriptCommand["name"];

export const STOP_REASONS: readonly StopReason[] = [
  "end_turn",
  "max_tokens",
  "max_turn_requests",
  "refusal",
  "cancelled",
];
const TOOL_KINDS: readonly ToolKind[] = [
  "read",
  "edit",
  "delete",
  "move",
  "search",
  "execute",
  "think",
  "fetch",
  "switch_mode",
  "other",
];

/** A script line that could not be parsed; the prompt fails with -32602 and this message. */
export class ScriptError extends Error {}

type Parser = (rest: string, words: string[]) => ScriptCommand;

function int(words: string[], index: number, what: string, fallback?: number): number {
  const word = words[index];
  if (word === undefined && fallback !== undefined) return fallback;
  const n = Number(word);
  if (word === undefined || !Number.isInteger(n) || n < 0)
    throw new ScriptError(`${what} must be a non-negative integer, got ${word ?? "nothing"}`);
  return n;
}

function required(text: string, what: string): string {
  if (!text) throw new ScriptError(`missing ${what}`);
  return text;
}

function json(text: string, what: string): unknown {
  if (!text) return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ScriptError(`${what} is not valid JSON: ${text}`);
  }
}

/** Words after the first `skip` words, as the original text (keeps inner spacing). */
function after(rest: string, skip: number): string {
  let text = rest;
  for (let i = 0; i < skip; i++) text = text.replace(/^\S+\s*/, "");
  return text;
}

const PARSERS: Record<CommandName, Parser> = {
  echo: (rest) => ({ name: "echo", text: rest }),
  chunks: (rest, w) => ({ name: "chunks", count: int(w, 0, "chunks N"), text: after(rest, 1) || undefined }),
  think: (rest) => ({ name: "think", text: rest }),
  tool: (rest, w) => {
    const kind = w[0] as ToolKind | undefined;
    if (!kind || !TOOL_KINDS.includes(kind))
      throw new ScriptError(`tool kind must be one of ${TOOL_KINDS.join(", ")}, got ${kind ?? "nothing"}`);
    return { name: "tool", kind, title: after(rest, 1) || kind };
  },
  "fail-tool": (rest) => ({ name: "fail-tool", title: rest || "failing tool" }),
  plan: (rest) => ({
    name: "plan",
    entries: required(rest, "plan entries")
      .split("|")
      .map((e) => e.trim())
      .filter(Boolean),
  }),
  permission: (rest) => ({ name: "permission", title: rest || "mock action" }),
  write: (rest, w) => ({ name: "write", path: required(w[0] ?? "", "write path"), content: after(rest, 1) }),
  read: (rest) => ({ name: "read", path: required(rest, "read path") }),
  "fs-write": (rest, w) => ({
    name: "fs-write",
    path: required(w[0] ?? "", "fs-write path"),
    content: after(rest, 1),
  }),
  terminal: (rest) => ({ name: "terminal", line: required(rest, "terminal command line") }),
  "terminal-kill": (rest) => ({ name: "terminal-kill", line: required(rest, "terminal-kill command line") }),
  sleep: (_, w) => ({ name: "sleep", ms: int(w, 0, "sleep MS") }),
  slow: (_, w) => ({ name: "slow", count: int(w, 0, "slow N"), ms: int(w, 1, "slow MS") }),
  crash: (_, w) => ({ name: "crash", code: int(w, 0, "crash code", 1) }),
  hang: () => ({ name: "hang" }),
  "close-stdout": () => ({ name: "close-stdout" }),
  garbage: (rest) => ({ name: "garbage", text: rest || "this is not json" }),
  stderr: (_, w) => ({ name: "stderr", bytes: int(w, 0, "stderr BYTES") }),
  bigline: (_, w) => ({ name: "bigline", bytes: int(w, 0, "bigline BYTES") }),
  stop: (_, w) => {
    const reason = w[0] as StopReason | undefined;
    if (!reason || !STOP_REASONS.includes(reason))
      throw new ScriptError(
        `stop reason must be one of ${STOP_REASONS.join(", ")}, got ${reason ?? "nothing"}`,
      );
    return { name: "stop", reason };
  },
  error: (rest, w) => {
    const code = Number(w[0]);
    if (!Number.isInteger(code))
      throw new ScriptError(`error CODE must be an integer, got ${w[0] ?? "nothing"}`);
    return { name: "error", code, message: after(rest, 1) || `mock error ${code}` };
  },
  image: () => ({ name: "image" }),
  messages: () => ({ name: "messages" }),
  "unknown-update": () => ({ name: "unknown-update" }),
  ext: (rest, w) => ({
    name: "ext",
    method: required(w[0] ?? "", "ext method"),
    params: json(after(rest, 1), "ext params"),
  }),
  "ext-request": (rest, w) => ({
    name: "ext-request",
    method: required(w[0] ?? "", "ext-request method"),
    params: json(after(rest, 1), "ext-request params"),
  }),
  meta: () => ({ name: "meta" }),
  env: (_, w) => ({ name: "env", variable: required(w[0] ?? "", "env NAME") }),
  json: (rest) => ({ name: "json", text: rest }),
  mcp: (rest, w) => {
    const args = json(after(rest, 1), "mcp args");
    if (typeof args !== "object" || args === null || Array.isArray(args))
      throw new ScriptError("mcp args must be a JSON object");
    return {
      name: "mcp",
      tool: required(w[0] ?? "", "mcp tool name"),
      args: args as Record<string, unknown>,
    };
  },
  "mcp-list": () => ({ name: "mcp-list" }),
  usage: (_, w) => ({ name: "usage", used: w[0] === undefined ? undefined : int(w, 0, "usage USED") }),
  "turn-usage": (_, w) => ({
    name: "turn-usage",
    input: int(w, 0, "turn-usage INPUT"),
    output: int(w, 1, "turn-usage OUTPUT"),
    thought: w[2] === undefined ? undefined : int(w, 2, "turn-usage THOUGHT"),
  }),
  title: (rest) => ({ name: "title", title: required(rest, "title words") }),
  commands: () => ({ name: "commands" }),
  blocks: () => ({ name: "blocks" }),
};

export const COMMAND_NAMES: readonly CommandName[] = Object.keys(PARSERS) as CommandName[];

function isCommandName(word: string): word is CommandName {
  return Object.hasOwn(PARSERS, word);
}

function firstWord(segment: string): string {
  return segment.trim().split(/\s+/, 1)[0] ?? "";
}

/** Commands whose line is taken verbatim: their argument may contain `;`. */
const VERBATIM = new Set(["json", "terminal", "terminal-kill"]);

/** Splits the prompt into segments: lines, then `;` (except verbatim lines: `json`, `terminal`…). */
function segments(text: string): string[] {
  return text
    .split(/\r?\n/)
    .flatMap((line) => (VERBATIM.has(firstWord(line)) ? [line] : line.split(";")))
    .map((s) => s.trim())
    .filter(Boolean);
}

function parseSegment(segment: string): ScriptCommand {
  const word = firstWord(segment);
  const rest = segment.slice(word.length).trim();
  if (!isCommandName(word)) return { name: "echo", text: segment };
  return PARSERS[word](rest, rest ? rest.split(/\s+/) : []);
}

/**
 * Parses prompt text into commands. A prompt with no command at all is echoed as
 * `echo: <text>`; inside a script, a line that is not a command is echoed as-is.
 */
export function parseScript(text: string): ScriptCommand[] {
  const parts = segments(text);
  if (!parts.some((s) => isCommandName(firstWord(s)))) return [{ name: "echo", text: `echo: ${text}` }];
  return parts.map((segment, i) => {
    try {
      return parseSegment(segment);
    } catch (error) {
      if (error instanceof ScriptError)
        throw new ScriptError(`script command ${i + 1} (${segment}): ${error.message}`);
      throw error;
    }
  });
}
