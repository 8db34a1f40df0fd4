import { RequestError } from "@agentclientprotocol/sdk";
import { closeStdout, writeStderr } from "../io.js";
import type { Turn } from "../turn.js";

export async function crash(turn: Turn, code: number): Promise<never> {
  await turn.flush();
  process.exit(code);
}

/** Never finishes on its own; only a cancel ends it. */
export function hang(turn: Turn): Promise<void> {
  return turn.untilCancelled(new Promise<void>(() => {}));
}

/** Closes stdout after everything sent so far, then hangs: the process lives on, mute. */
export async function closeOutput(turn: Turn): Promise<void> {
  await turn.flush();
  await closeStdout();
  return hang(turn);
}

export function garbage(turn: Turn, text: string): Promise<void> {
  return turn.raw(text);
}

export function stderr(_turn: Turn, bytes: number): Promise<void> {
  return writeStderr(bytes);
}

export function error(_turn: Turn, code: number, message: string): never {
  throw new RequestError(code, message);
}
