import { spawn, type ChildProcess } from "node:child_process";
import { Readable, Writable } from "node:stream";
import {
  client,
  ndJsonStream,
  type ClientContext,
  type RequestPermissionRequest,
  type RequestPermissionResponse,
  type SessionNotification,
} from "@agentclientprotocol/sdk";
import { mockAgentCommand } from "../src/index.js";

export interface AgentUnderTest {
  child: ChildProcess;
  agent: ClientContext;
  updates: SessionNotification[];
  permissionRequests: RequestPermissionRequest[];
  /** Notifications other than session/update (extension notifications). */
  otherNotifications: { method: string; params: unknown }[];
  /** Everything the agent wrote to stdout, verbatim. */
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Initializes with fs capabilities unless told otherwise. */
  initialize(): Promise<void>;
  stop(): Promise<void>;
}

export interface StartOptions {
  flags?: string[];
  env?: Record<string, string | undefined>;
  /** optionId to select, or "cancelled". Default allow_once. */
  permission?: string | ((req: RequestPermissionRequest) => Promise<RequestPermissionResponse>);
  readTextFile?: (path: string) => string;
}

const running = new Set<ChildProcess>();

/** Kills every agent still running (use in `after`). */
export function killAll(): void {
  for (const child of running) child.kill("SIGKILL");
}

export function startAgent(options: StartOptions = {}): AgentUnderTest {
  const { command, args } = mockAgentCommand(options.flags);
  const child = spawn(command, args, {
    env: { ...process.env, ...options.env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  running.add(child);
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString("utf8")));
  child.stderr.on("data", (d: Buffer) => (err += d.toString("utf8")));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => {
      running.delete(child);
      resolve({ code, signal });
    }),
  );
  const updates: SessionNotification[] = [];
  const permissionRequests: RequestPermissionRequest[] = [];
  const otherNotifications: { method: string; params: unknown }[] = [];
  const answer = options.permission ?? "allow_once";
  const app = client({ name: "mock-agent-test" })
    .onNotification("session/update", ({ params }) => void updates.push(params))
    .onRequest("session/request_permission", async ({ params }) => {
      permissionRequests.push(params);
      if (typeof answer === "function") return answer(params);
      return answer === "cancelled"
        ? { outcome: { outcome: "cancelled" } }
        : { outcome: { outcome: "selected", optionId: answer } };
    })
    .onNotification("*", ({ method, params }) => void otherNotifications.push({ method, params }))
    .onRequest(
      "_mock/echo",
      (params: unknown) => params,
      ({ params }) => ({ echoed: params }),
    )
    .onRequest("fs/read_text_file", ({ params }) => {
      if (!options.readTextFile) throw new Error("no fs");
      return { content: options.readTextFile(params.path) };
    });
  const stream = ndJsonStream(
    Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
    Readable.toWeb(child.stdout) as ReadableStream<Uint8Array>,
  );
  const connection = app.connect(stream);
  return {
    child,
    agent: connection.agent,
    updates,
    permissionRequests,
    otherNotifications,
    stdout: () => out,
    stderr: () => err,
    exited,
    async initialize() {
      await connection.agent.request("initialize", {
        protocolVersion: 1,
        clientCapabilities: { fs: { readTextFile: Boolean(options.readTextFile), writeTextFile: false } },
      });
    },
    async stop() {
      connection.close();
      child.stdin.end();
      const timer = setTimeout(() => child.kill("SIGKILL"), 2000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Text of the agent_message_chunk updates of `sessionId`, in order. */
export function messageTexts(updates: readonly SessionNotification[], sessionId: string): string[] {
  return updates.flatMap((n) =>
    n.sessionId === sessionId &&
    n.update.sessionUpdate === "agent_message_chunk" &&
    n.update.content.type === "text"
      ? [n.update.content.text]
      : [],
  );
}

export function kinds(updates: readonly SessionNotification[], sessionId: string): string[] {
  return updates.filter((n) => n.sessionId === sessionId).map((n) => n.update.sessionUpdate);
}
