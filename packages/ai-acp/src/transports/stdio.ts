import { ndJsonStream } from "@agentclientprotocol/sdk";
import type { SandboxInstance } from "@sandbox-agent/ai-sandbox";
import type { AcpSessionTransport } from "../config.js";

export interface StdioTransportOptions {
  cwd?: string;
  env?: Record<string, string>;
}

/** Spawns `command` inside the sandbox and speaks newline-delimited ACP over its stdio. */
export async function stdioTransport(
  sandbox: SandboxInstance,
  command: string,
  options: StdioTransportOptions = {},
): Promise<AcpSessionTransport> {
  const proc = await sandbox.spawn(command, {
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
    ...(options.env !== undefined ? { env: options.env } : {}),
  });
  return {
    kind: "stream",
    stream: ndJsonStream(proc.stdin, proc.stdout),
    exited: proc.exited,
    stderrTail: () => proc.stderrTail(),
    dispose: () => proc.kill(),
  };
}
