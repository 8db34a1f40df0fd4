import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  defineSandbox,
  localProcessSandbox,
  withSandbox,
  type LocalProcessSandboxOptions,
  type SandboxDefinition,
  type Workspace,
} from "@sandbox-agent/ai-sandbox";
import { freePort, mockAgentBin } from "@sandbox-agent/testkit";
import { chat, type StreamChunk } from "@tanstack/ai";
import { acpCompatible, type AcpCompatibleConfig } from "../src/index.js";

export { freePort, mockAgentBin };

/** Shell command that starts the real mock agent with `flags`. */
export function mockCommand(...flags: string[]): string {
  return [process.execPath, mockAgentBin, ...flags].map(quote).join(" ");
}

/**
 * Shell command of an agent that serves ACP over WebSocket itself on `port` (as `my-agent serve
 * --bind ...` would): the package's WebSocket bridge in front of the mock agent, run as one
 * command that prints `ACP_WS_LISTENING <port>` once it listens.
 */
export function ownWebSocketServerCommand(port: number, host = "127.0.0.1"): string {
  const bridge = fileURLToPath(new URL("../src/bin/acp-ws-bridge.js", import.meta.url));
  const mock = Buffer.from(mockCommand(), "utf8").toString("base64");
  return [process.execPath, bridge, host, String(port), mock].map(quote).join(" ");
}

/** The mock behind a proxy that rewrites its advertised capabilities (see capability-proxy.ts). */
export function proxiedMockCommand(overrides: Record<string, unknown>, ...flags: string[]): string {
  const proxy = fileURLToPath(new URL("./capability-proxy.js", import.meta.url));
  return [process.execPath, proxy, JSON.stringify(overrides), process.execPath, mockAgentBin, ...flags]
    .map(quote)
    .join(" ");
}

export function quote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

export interface TestBed {
  sandbox: SandboxDefinition;
  root: string;
  /** A harness on the mock; every harness made here is disposed by `close()`. */
  harness(config?: Partial<AcpCompatibleConfig>): ReturnType<typeof acpCompatible>;
  close(): Promise<void>;
}

export async function testBed(
  id: string,
  workspace?: Workspace,
  provider: Omit<LocalProcessSandboxOptions, "root"> = {},
): Promise<TestBed> {
  const root = await mkdtemp(join(tmpdir(), "ai-acp-"));
  const sandbox = defineSandbox({
    id,
    provider: localProcessSandbox({ ...provider, root }),
    ...(workspace ? { workspace } : {}),
  });
  const harnesses: Array<{ dispose(): Promise<void> }> = [];
  return {
    sandbox,
    root,
    harness(config = {}) {
      const h = acpCompatible({ name: "mock", command: () => mockCommand(), ...config });
      harnesses.push(h);
      return h;
    },
    async close() {
      await Promise.all(harnesses.map((h) => h.dispose()));
      await sandbox.dispose();
      await rm(root, { recursive: true, force: true });
    },
  };
}

export function user(text: string): { role: "user"; content: string } {
  return { role: "user", content: text };
}

/** Runs chat() to completion and returns every chunk. */
export async function run(
  bed: TestBed,
  adapter: Parameters<typeof chat>[0]["adapter"],
  prompt: string,
  extra: Record<string, unknown> = {},
): Promise<StreamChunk[]> {
  const stream = chat({
    adapter,
    messages: [user(prompt)],
    middleware: [withSandbox(bed.sandbox)],
    ...extra,
  } as unknown as Parameters<typeof chat>[0]) as AsyncIterable<StreamChunk>;
  const chunks: StreamChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

export function texts(chunks: ReadonlyArray<StreamChunk>): string {
  return chunks
    .filter((c) => c.type === "TEXT_MESSAGE_CONTENT")
    .map((c) => (c as { delta: string }).delta)
    .join("");
}

export function customs(chunks: ReadonlyArray<StreamChunk>, name: string): unknown[] {
  return chunks
    .filter((c) => c.type === "CUSTOM" && c.name === name)
    .map((c) => (c as { value: unknown }).value);
}

/** Chunks of one event type, as plain records (tests read fields by name). */
export function ofType(chunks: ReadonlyArray<StreamChunk>, type: string): Array<Record<string, unknown>> {
  return chunks.filter((c) => c.type === type) as unknown as Array<Record<string, unknown>>;
}
