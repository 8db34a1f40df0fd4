import { randomBytes } from "node:crypto";
import { SandboxAgentClient, type SandboxAgentClientOptions } from "./client.js";
import { ServerProcess, defaultServerBin } from "./server-process.js";

export interface StartOptions extends Omit<SandboxAgentClientOptions, "baseUrl" | "token" | "autoConnect"> {
  /**
   * The server CLI to run: a `.js` file (run with the current Node) or an executable. Default:
   * `$SANDBOX_AGENT_SERVER_BIN`, else the bin of `@sandbox-agent/server` if it is installed, else
   * `sandbox-agent` on PATH.
   */
  serverBin?: string;
  /** Extra `sandbox-agent server` arguments (e.g. `["--config", file]`). */
  serverArgs?: string[];
  /** Extra environment for the server (credentials its agents need, data dir…). */
  env?: Record<string, string | undefined>;
  /** Max time for the server to listen and report healthy (ms, default 15000). */
  startTimeoutMs?: number;
}

/** Information about the server an embedded client started. */
export interface EmbeddedServer {
  readonly baseUrl: string;
  /** The generated bearer token, for other clients of this server (e.g. a raw transport). */
  readonly token: string;
  readonly pid: number | undefined;
  readonly running: boolean;
  /** The server's recent log (stderr). */
  logs(): string;
}

const HEALTH_POLL_MS = 50;

/**
 * A client that runs its own server: `SandboxAgent.start()` spawns the server on a free loopback
 * port with a random token, waits until it is healthy and returns a connected client. `dispose()`
 * (or `await using`) stops the server; so does the exit of this process.
 */
export class SandboxAgent extends SandboxAgentClient {
  private readonly process: ServerProcess;

  private constructor(options: SandboxAgentClientOptions, serverProcess: ServerProcess) {
    super(options);
    this.process = serverProcess;
  }

  get server(): EmbeddedServer {
    return this.process;
  }

  static async start(options: StartOptions): Promise<SandboxAgent> {
    const { serverBin, serverArgs, env, startTimeoutMs = 15_000, ...clientOptions } = options;
    const token = randomBytes(24).toString("base64url");
    const serverProcess = await ServerProcess.start({
      serverBin: serverBin ?? defaultServerBin(),
      token,
      args: serverArgs ?? [],
      env: env ?? {},
      startTimeoutMs,
    });
    const client = new SandboxAgent(
      { ...clientOptions, baseUrl: serverProcess.baseUrl, token, autoConnect: false },
      serverProcess,
    );
    try {
      await client.waitHealthy(Date.now() + startTimeoutMs);
      await client.connect();
      return client;
    } catch (error) {
      await client.dispose();
      throw error;
    }
  }

  override async dispose(): Promise<void> {
    try {
      await super.dispose();
    } finally {
      await this.process.stop();
    }
  }

  private async waitHealthy(deadline: number): Promise<void> {
    for (;;) {
      try {
        const health = await this.health();
        if (health.status === "ok") return;
      } catch (error) {
        if (!this.process.running || Date.now() > deadline) throw error;
      }
      if (!this.process.running)
        throw new Error(`sandbox-agent server exited\n${this.process.logs().slice(-4000)}`);
      if (Date.now() > deadline) throw new Error("sandbox-agent server did not become healthy in time");
      await new Promise((resolve) => setTimeout(resolve, HEALTH_POLL_MS));
    }
  }
}
