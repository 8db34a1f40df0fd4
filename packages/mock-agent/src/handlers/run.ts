import type { ScriptCommand } from "../script.js";
import { TurnStop, type Turn } from "../turn.js";
import * as client from "./client.js";
import * as content from "./content.js";
import * as control from "./control.js";
import * as ext from "./ext.js";
import * as mcp from "./mcp.js";
import * as tools from "./tools.js";

type Runner<C extends ScriptCommand> = (turn: Turn, command: C) => Promise<void>;
type Runners = { [N in ScriptCommand["name"]]: Runner<Extract<ScriptCommand, { name: N }>> };

const RUNNERS: Runners = {
  echo: (t, c) => t.message(c.text),
  chunks: (t, c) => content.chunks(t, c.count, c.text),
  think: (t, c) => content.think(t, c.text),
  tool: (t, c) => tools.tool(t, c.kind, c.title),
  "fail-tool": (t, c) => tools.failTool(t, c.title),
  plan: (t, c) => content.plan(t, c.entries),
  permission: (t, c) => tools.permission(t, c.title),
  write: (t, c) => tools.write(t, c.path, c.content),
  read: (t, c) => client.read(t, c.path),
  "fs-write": (t, c) => client.fsWrite(t, c.path, c.content),
  terminal: (t, c) => client.terminal(t, c.line, false),
  "terminal-kill": (t, c) => client.terminal(t, c.line, true),
  sleep: (t, c) => t.sleep(c.ms),
  slow: (t, c) => content.slow(t, c.count, c.ms),
  crash: (t, c) => control.crash(t, c.code),
  hang: (t) => control.hang(t),
  "close-stdout": (t) => control.closeOutput(t),
  garbage: (t, c) => control.garbage(t, c.text),
  stderr: (t, c) => control.stderr(t, c.bytes),
  bigline: (t, c) => content.bigline(t, c.bytes),
  stop: async (_t, c) => {
    throw new TurnStop(c.reason);
  },
  error: async (t, c) => control.error(t, c.code, c.message),
  image: (t) => content.image(t),
  messages: (t) => content.messages(t),
  "unknown-update": (t) => content.unknownUpdate(t),
  ext: (t, c) => ext.ext(t, c.method, c.params),
  "ext-request": (t, c) => ext.extRequest(t, c.method, c.params),
  meta: (t) => content.meta(t),
  env: (t, c) => content.env(t, c.variable),
  json: (t, c) => t.message(c.text),
  mcp: (t, c) => mcp.mcpCall(t, c.tool, c.args),
  "mcp-list": (t) => mcp.mcpList(t),
  usage: (t, c) => content.usage(t, c.used),
  "turn-usage": async (t, c) => content.turnUsage(t, c.input, c.output, c.thought),
  title: (t, c) => content.title(t, c.title),
  commands: (t) => content.commands(t),
  blocks: (t) => content.blocks(t),
};

function runOne<C extends ScriptCommand>(turn: Turn, command: C): Promise<void> {
  return (RUNNERS[command.name] as Runner<C>)(turn, command);
}

/** Runs the commands in order; cancellation is checked between commands. */
export async function runScript(turn: Turn, commands: readonly ScriptCommand[]): Promise<void> {
  for (const command of commands) {
    turn.checkCancelled();
    await runOne(turn, command);
  }
  turn.checkCancelled();
}
