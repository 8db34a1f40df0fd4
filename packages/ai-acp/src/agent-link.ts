import {
  client,
  PROTOCOL_VERSION,
  type ClientConnection,
  type ClientContext,
  type InitializeResponse,
  type RequestPermissionRequest,
  type SessionUpdate,
} from "@agentclientprotocol/sdk";
import type { AcpSessionTransport, AuthMode, ExtNotification } from "./config.js";
import { AcpHarnessError, errorMessage, withTimeout } from "./errors.js";
import { CANCELLED, type PermissionOutcome } from "./permissions.js";

/** Receives what the agent sends for one session while a turn is running. */
export interface TurnSink {
  onUpdate(update: SessionUpdate): void;
  onPermission(request: RequestPermissionRequest, signal: AbortSignal): Promise<PermissionOutcome>;
}

export interface AgentDeath {
  code: number | null;
  signal: string | null;
  stderrTail: string;
}

export interface OpenLinkOptions {
  name: string;
  transport: AcpSessionTransport;
  initializeTimeoutMs: number;
  authMode: AuthMode;
  authMethodId: string | undefined;
  onExtNotification: ((notification: ExtNotification) => void) | undefined;
}

const CLIENT_INFO = { name: "@sandbox-agent/ai-acp", version: "0.1.0" };
const STDERR_TAIL_CHARS = 4_000;

/** One initialized ACP connection to one agent (usually one process). */
export class AgentLink {
  private readonly sinks = new Map<string, TurnSink>();
  private connection: ClientConnection | undefined;
  private initResponse: InitializeResponse | undefined;
  private deathInfo: AgentDeath | undefined;
  readonly death: Promise<AgentDeath>;

  private constructor(private readonly options: OpenLinkOptions) {
    const exited = options.transport.exited ?? new Promise<never>(() => undefined);
    this.death = exited.then(({ code, signal }) => {
      this.deathInfo = { code, signal, stderrTail: this.stderrTail() };
      return this.deathInfo;
    });
  }

  static async open(options: OpenLinkOptions): Promise<AgentLink> {
    const link = new AgentLink(options);
    try {
      await withTimeout(
        link.handshake(),
        options.initializeTimeoutMs,
        () =>
          new AcpHarnessError(
            "initialize_timeout",
            `${options.name}: agent did not answer initialize within ${options.initializeTimeoutMs} ms${link.stderrSuffix()}`,
          ),
      );
    } catch (err) {
      await link.close();
      throw err;
    }
    return link;
  }

  get init(): InitializeResponse {
    if (!this.initResponse) throw new Error("AgentLink used before initialize");
    return this.initResponse;
  }

  get agent(): ClientContext {
    if (!this.connection) throw new Error("AgentLink used before connect");
    return this.connection.agent;
  }

  get dead(): AgentDeath | undefined {
    return this.deathInfo;
  }

  attach(sessionId: string, sink: TurnSink): void {
    this.sinks.set(sessionId, sink);
  }

  detach(sessionId: string): void {
    this.sinks.delete(sessionId);
  }

  stderrTail(): string {
    return (this.options.transport.stderrTail?.() ?? "").slice(-STDERR_TAIL_CHARS);
  }

  stderrSuffix(): string {
    const tail = this.stderrTail().trim();
    return tail ? `\nagent stderr (tail):\n${tail}` : "";
  }

  async close(): Promise<void> {
    this.connection?.close();
    await this.options.transport.dispose().catch(() => undefined);
  }

  private async handshake(): Promise<void> {
    this.connection = this.app().connect(this.options.transport.stream);
    const init: InitializeResponse = await this.untilDeath<InitializeResponse>(
      this.connection.agent.request("initialize", {
        protocolVersion: PROTOCOL_VERSION,
        // The agent runs inside the sandbox with direct file and shell access.
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
        clientInfo: CLIENT_INFO,
      }),
      "initialize",
    ).catch((err: unknown): never => {
      if (err instanceof AcpHarnessError) throw err;
      throw new AcpHarnessError(
        "initialize_failed",
        `${this.options.name}: initialize failed: ${errorMessage(err)}${this.stderrSuffix()}`,
      );
    });
    // The SDK accepts any version; ACP says a client that cannot speak the answer must disconnect.
    if (init.protocolVersion !== PROTOCOL_VERSION) {
      throw new AcpHarnessError(
        "unsupported_protocol_version",
        `${this.options.name}: agent answered ACP protocol version ${init.protocolVersion}; this client supports ${PROTOCOL_VERSION}`,
      );
    }
    this.initResponse = init;
    await this.authenticate(init);
  }

  private async authenticate(init: InitializeResponse): Promise<void> {
    const { authMode, authMethodId, name } = this.options;
    if (authMode === "host" || authMethodId === undefined) return;
    const advertised = (init.authMethods ?? []).map((method) => method.id);
    if (!advertised.includes(authMethodId)) {
      throw new AcpHarnessError(
        "auth_method_unknown",
        `${name}: auth method "${authMethodId}" is not advertised by the agent (advertised: ${advertised.join(", ") || "none"})`,
      );
    }
    await this.untilDeath(
      this.agent.request("authenticate", { methodId: authMethodId }),
      "authenticate",
    ).catch((err: unknown): never => {
      if (err instanceof AcpHarnessError) throw err;
      throw new AcpHarnessError(
        "authenticate_failed",
        `${name}: authenticate failed: ${errorMessage(err)}${this.stderrSuffix()}`,
      );
    });
  }

  /** Fails fast with the exit status when the agent dies while we wait. */
  untilDeath<T>(promise: Promise<T>, what: string): Promise<T> {
    return Promise.race([
      promise,
      this.death.then((death) => {
        throw new AcpHarnessError(
          "agent_exited",
          `${this.options.name}: agent exited during ${what}${describeDeath(death)}`,
        );
      }),
    ]);
  }

  private app(): ReturnType<typeof client> {
    const { onExtNotification } = this.options;
    return client({ name: CLIENT_INFO.name })
      .onNotification("session/update", ({ params }) => {
        // Handled synchronously so updates keep their arrival order.
        this.sinks.get(params.sessionId)?.onUpdate(params.update);
      })
      .onRequest("session/request_permission", ({ params, signal }) => {
        const sink = this.sinks.get(params.sessionId);
        return sink
          ? sink.onPermission(params, signal).then((outcome) => ({ outcome }))
          : { outcome: CANCELLED };
      })
      .onNotification("*", ({ method, params }) => {
        if (method.startsWith("_")) onExtNotification?.({ method, params });
      });
  }
}

export function describeDeath(death: AgentDeath): string {
  const tail = death.stderrTail.trim();
  return ` (exit code ${death.code ?? "none"}, signal ${death.signal ?? "none"})${tail ? `\nagent stderr (tail):\n${tail}` : ""}`;
}
