import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import {
  mockAgentBin,
  startServer,
  tempDir,
  waitFor,
  type RunningServer,
  type SseEvent,
} from "@sandbox-agent/testkit";
import { agentText, type RpcMessage, type SseReader } from "./rpc.js";

/** Helpers of the durable-connection tests: a server on a data directory, stopped and started again. */

export interface ServerSetup {
  dataDir: string;
  /** The mock agent keeps its sessions here, so a restarted agent can load them. */
  stateDir: string;
  agent?: { command: string; args: string[] };
  config?: Record<string, unknown>;
  /** A command the server is started through (it must exec the server; see testkit's `startServer`). */
  wrapper?: string[];
}

export function setup(more: Partial<ServerSetup> = {}): ServerSetup {
  return { dataDir: tempDir("durable-data-"), stateDir: tempDir("durable-mock-"), ...more };
}

/** The real server on `setup.dataDir`; every run of it on the same setup finds the same connections. */
export function serve(s: ServerSetup): Promise<RunningServer> {
  const agent = s.agent ?? { command: process.execPath, args: [mockAgentBin] };
  return startServer({
    args: ["--data-dir", s.dataDir],
    wrapper: s.wrapper,
    config: { agents: { mock: { ...agent, env: { MOCK_AGENT_STATE_DIR: s.stateDir } } }, ...s.config },
  });
}

/** The server on one data directory, stopped and started again by a test: each run finds the same connections. */
export class Restartable {
  private current: RunningServer;

  constructor(
    readonly setup: ServerSetup,
    first: RunningServer,
  ) {
    this.current = first;
  }

  /** The current run. */
  get server(): RunningServer {
    return this.current;
  }

  /** Stops the current run with `signal`; resolves once it exited and the client's stream `sse` ended. */
  async kill(signal: NodeJS.Signals, sse: SseReader): Promise<void> {
    const exited = new Promise((resolve) => this.current.process.once("exit", resolve));
    this.current.process.kill(signal);
    await exited;
    await sse.done;
  }

  /** Starts the server again on the same data directory; resolves once it listens. */
  async start(): Promise<RunningServer> {
    this.current = await serve(this.setup);
    return this.current;
  }

  /** `kill`, then `start`. */
  async restart(signal: NodeJS.Signals, sse: SseReader): Promise<RunningServer> {
    await this.kill(signal, sse);
    return this.start();
  }
}

/** Runs `test` with the server on `s`, which it may restart; the run current when it ends is stopped. */
export async function withRestarts<T>(s: ServerSetup, test: (run: Restartable) => Promise<T>): Promise<T> {
  const run = new Restartable(s, await serve(s));
  try {
    return await test(run);
  } finally {
    await run.server.stop();
  }
}

/** The events that carried a message (not priming events, comments or retry hints). */
export function delivered(events: SseEvent[]): Array<{ id: string; data: string }> {
  return events
    .filter((e) => e.id !== undefined && e.data !== "" && e.event !== "comment" && e.event !== "retry")
    .map((e) => ({ id: e.id!, data: e.data }));
}

/** Fails unless the events' ids are one epoch and consecutive sequence numbers from `from`. */
export function assertConsecutive(events: Array<{ id: string }>, epoch: string, from: number): void {
  events.forEach((e, i) => assert.equal(e.id, `${epoch}.${from + i}`, `event ${i} of ${events.length}`));
}

/** The `chunk N ` texts of a `chunks` turn, in order: N = 1, 2, 3… with no gap and no repeat. */
export function assertChunksInOrder(messages: RpcMessage[]): number {
  const text = agentText(messages);
  const numbers = [...text.matchAll(/chunk (\d+) /g)].map((m) => Number(m[1]));
  numbers.forEach((n, i) => assert.equal(n, i + 1, `chunk ${i + 1} of ${numbers.length}`));
  return numbers.length;
}

/**
 * Waits for the answer to request `id`, scanning the raw events from the newest (no message is
 * parsed: the streams here carry thousands).
 */
export async function answerTo(sse: SseReader, id: number, timeoutMs = 30_000): Promise<RpcMessage> {
  const prefix = `{"jsonrpc":"2.0","id":${id},`;
  const event = await waitFor(
    () => sse.events.findLast((e) => e.data.startsWith(prefix)),
    timeoutMs,
    `the answer to request ${id}`,
  );
  return JSON.parse(event.data) as RpcMessage;
}

export const epochOf = (id: string) => id.split(".")[0]!;
export const seqOf = (id: string) => Number(id.split(".")[1]);

/**
 * The ids a connection's `requests.journal` names as open, as JSON text: `+<seq> <id>` lines after
 * the last `=[[seq,id],…]` line, and those it lists. Answers are taken out only by the checkpoint
 * (about once a second), so this is what a restart would answer only together with the log.
 */
export function openRequests(journal: string): string[] {
  const open = new Set<string>();
  for (const line of readFileSync(journal, "utf8").split("\n"))
    if (line.startsWith("+")) open.add(line.slice(line.indexOf(" ") + 1));
    else if (line.startsWith("=")) {
      open.clear();
      for (const [, id] of JSON.parse(line.slice(1)) as Array<[number, unknown]>)
        open.add(JSON.stringify(id));
    }
  return [...open];
}
