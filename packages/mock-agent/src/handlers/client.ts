/** Commands that call the client's `fs/*` and `terminal/*` methods (when it advertised them). */
import path from "node:path";
import { RequestError } from "@agentclientprotocol/sdk";
import type { Turn } from "../turn.js";

/** Runs `call`; a JSON-RPC error from the client becomes the message `<what> failed: <code> <message>`. */
async function clientCall(turn: Turn, what: string, call: () => Promise<string>): Promise<void> {
  try {
    await turn.message(await turn.untilCancelled(call()));
  } catch (error) {
    if (!(error instanceof RequestError)) throw error;
    await turn.message(`${what} failed: ${error.code} ${error.message}`);
  }
}

export async function read(turn: Turn, target: string): Promise<void> {
  if (!turn.state.clientCapabilities?.fs?.readTextFile) return turn.message("fs not supported");
  const file = path.resolve(turn.session.cwd, target);
  await clientCall(turn, `read ${target}`, async () => {
    const { content } = await turn.client.request("fs/read_text_file", {
      sessionId: turn.sessionId,
      path: file,
    });
    return `read ${target}: ${content}`;
  });
}

export async function fsWrite(turn: Turn, target: string, content: string): Promise<void> {
  if (!turn.state.clientCapabilities?.fs?.writeTextFile) return turn.message("fs not supported");
  const file = path.resolve(turn.session.cwd, target);
  await clientCall(turn, `fs-write ${target}`, async () => {
    await turn.client.request("fs/write_text_file", { sessionId: turn.sessionId, path: file, content });
    return `fs-wrote ${target}`;
  });
}

/**
 * Runs `line` with `sh -c` in a client terminal, shown as an `execute` tool call with the
 * terminal embedded: create, (kill,) wait for exit, read the output, release.
 */
export async function terminal(turn: Turn, line: string, kill: boolean): Promise<void> {
  if (!turn.state.clientCapabilities?.terminal) return turn.message("terminal not supported");
  const sessionId = turn.sessionId;
  const toolCallId = turn.nextToolCallId();
  await clientCall(turn, "terminal", async () => {
    const handle = await turn.client.createTerminal({
      sessionId,
      command: "sh",
      args: ["-c", line],
      cwd: turn.session.cwd,
    });
    try {
      await turn.emit({
        sessionUpdate: "tool_call",
        toolCallId,
        title: line,
        kind: "execute",
        status: "in_progress",
        content: [{ type: "terminal", terminalId: handle.id }],
        rawInput: { command: line },
      });
      if (kill) await handle.kill();
      const exit = await handle.waitForExit();
      const { output, truncated } = await handle.currentOutput();
      const ok = exit.exitCode === 0;
      await turn.emit({ sessionUpdate: "tool_call_update", toolCallId, status: ok ? "completed" : "failed" });
      const status = exit.exitCode ?? exit.signal;
      return `terminal ${kill ? "killed" : "exit"} ${status}: ${output}${truncated ? " (truncated)" : ""}`;
    } finally {
      await handle.release();
    }
  });
}
