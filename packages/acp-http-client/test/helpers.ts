import http from "node:http";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import type { AddressInfo } from "node:net";
import {
  ndJsonStream,
  PROTOCOL_VERSION,
  type AgentConnector,
  type InitializeRequest,
} from "@agentclientprotocol/sdk";
import { AcpServer } from "@agentclientprotocol/sdk/experimental/server";
import { createNodeHttpHandler } from "@agentclientprotocol/sdk/experimental/node";
import { mockAgentCommand } from "@sandbox-agent/mock-agent";
import { startServer } from "@sandbox-agent/testkit";

export { startProxy, type CuttableProxy } from "@sandbox-agent/testkit";

export interface TestServer {
  baseUrl: string;
  port: number;
  stop(): Promise<void>;
}

/** Params every test sends; `_meta` picks the mock agent on our server and is ignored elsewhere. */
export function initParams(extra: Partial<InitializeRequest> = {}): InitializeRequest {
  return {
    protocolVersion: PROTOCOL_VERSION,
    clientCapabilities: {},
    _meta: { "sandboxagent.dev": { agent: "mock" } },
    ...extra,
  };
}

/** Our server (packages/server) as a real child process. */
export async function startOurServer(): Promise<TestServer> {
  const server = await startServer();
  return { baseUrl: server.baseUrl, port: server.port, stop: () => server.stop() };
}

/** The SDK's experimental `AcpServer` fronting the mock agent as a subprocess. */
export async function startSdkServer(): Promise<TestServer> {
  const children = new Set<ReturnType<typeof spawn>>();
  const connector: AgentConnector = {
    connect(stream) {
      const { command, args } = mockAgentCommand();
      const child = spawn(command, args, { stdio: ["pipe", "pipe", "ignore"] });
      children.add(child);
      const agent = ndJsonStream(
        Writable.toWeb(child.stdin!),
        Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>,
      );
      void stream.readable
        .pipeTo(agent.writable)
        .catch(() => undefined)
        .finally(() => child.stdin!.end());
      void agent.readable.pipeTo(stream.writable).catch(() => undefined);
      return {
        closed: new Promise<void>((resolve) => child.once("exit", () => (children.delete(child), resolve()))),
      };
    },
  };
  const server = http.createServer(createNodeHttpHandler(new AcpServer({ agent: connector })));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    port,
    stop: async () => {
      for (const child of children) child.kill("SIGKILL");
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Text of the prompt as one text block. */
export function text(value: string): [{ type: "text"; text: string }] {
  return [{ type: "text", text: value }];
}
