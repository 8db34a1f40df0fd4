import { after, before } from "node:test";
import { startServer, type RunningServer, type StartServerOptions } from "@sandbox-agent/testkit";
import { SandboxAgentClient, type SandboxAgentClientOptions, type SandboxAgentEvent } from "../src/index.js";

export const TOKEN = "sdk-test-token";

export interface Fixture {
  server: RunningServer;
  /** A client for the mock agent on the fixture's server, disposed after the suite. */
  client(options?: Partial<SandboxAgentClientOptions>): SandboxAgentClient;
}

/** One real server per test file (started in `before`, stopped in `after`), plus tracked clients. */
export function useServer(options: StartServerOptions = {}): Fixture {
  const clients: SandboxAgentClient[] = [];
  const fixture = {
    server: undefined as unknown as RunningServer,
    client(overrides: Partial<SandboxAgentClientOptions> = {}): SandboxAgentClient {
      const client = new SandboxAgentClient({
        baseUrl: fixture.server.baseUrl,
        token: TOKEN,
        agent: "mock",
        requestTimeoutMs: 15_000,
        ...overrides,
      });
      clients.push(client);
      return client;
    },
  };
  before(async () => {
    fixture.server = await startServer({ token: TOKEN, ...options });
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.dispose().catch(() => undefined)));
    await fixture.server?.stop();
  });
  return fixture;
}

/** Collects every event into an array (for assertions after the fact). */
export function record(client: SandboxAgentClient): SandboxAgentEvent[] {
  const events: SandboxAgentEvent[] = [];
  client.on("*", (event) => events.push(event));
  return events;
}

/** Text of the agent's message chunks among `events`, in order. */
export function messageTexts(events: SandboxAgentEvent[], sessionId?: string): string[] {
  const texts: string[] = [];
  for (const event of events) {
    if (event.type !== "update" || (sessionId && event.sessionId !== sessionId)) continue;
    const update = event.update;
    if (update.sessionUpdate === "agent_message_chunk" && update.content.type === "text")
      texts.push(update.content.text);
  }
  return texts;
}

export async function healthConnections(fixture: Fixture): Promise<number> {
  const response = await fetch(`${fixture.server.baseUrl}/v2/health`, { headers: fixture.server.headers() });
  return ((await response.json()) as { connections: number }).connections;
}
