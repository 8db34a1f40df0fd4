import { SandboxAgentClient, SandboxAgentHttpError, type HealthStatus } from "sandbox-agent";
import { errorMessage } from "./format.js";
import { Observable } from "./observable.js";

/** Placeholder agent id of the control-plane client: it never opens an agent connection. */
const NO_AGENT = "-";
const HEALTH_POLL_MS = 5000;

export type Probe =
  | { kind: "ok"; health: HealthStatus }
  | { kind: "unauthorized"; tokenSent: boolean }
  | { kind: "unreachable"; message: string };

/** Asks `/v2/health` whether this token (or none) is accepted; nothing else is requested before. */
export async function probe(token: string | undefined): Promise<Probe> {
  const client = new SandboxAgentClient({
    baseUrl: location.origin,
    token,
    agent: NO_AGENT,
    autoConnect: false,
  });
  try {
    return { kind: "ok", health: await client.health() };
  } catch (error) {
    if (error instanceof SandboxAgentHttpError && error.status === 401)
      return { kind: "unauthorized", tokenSent: token !== undefined };
    return { kind: "unreachable", message: errorMessage(error) };
  }
}

/** The server this page came from: control-plane client, health and advertised features. */
export class ServerModel extends Observable {
  readonly baseUrl = location.origin;
  /** Control plane only (agents, files, health); agent connections are `ConnectionModel`s. */
  readonly control: SandboxAgentClient;
  health: HealthStatus;
  /** Whether the last health poll failed (the page keeps working from what it has). */
  offline = false;
  /** The server documents a processes API (`/v2/processes`): the Processes tab appears. */
  processes = false;
  private readonly timer: ReturnType<typeof setInterval>;

  constructor(
    readonly token: string | undefined,
    health: HealthStatus,
  ) {
    super();
    this.health = health;
    this.control = new SandboxAgentClient({
      baseUrl: this.baseUrl,
      token,
      agent: NO_AGENT,
      autoConnect: false,
    });
    this.timer = setInterval(() => void this.refreshHealth(), HEALTH_POLL_MS);
    void this.detectFeatures();
  }

  dispose(): void {
    clearInterval(this.timer);
  }

  /** Headers for the few requests the SDK has no call for (the OpenAPI document). */
  authHeaders(): Record<string, string> {
    return this.token ? { authorization: `Bearer ${this.token}` } : {};
  }

  async refreshHealth(): Promise<void> {
    try {
      this.health = await this.control.health();
      this.offline = false;
    } catch {
      this.offline = true;
    }
    this.changed();
  }

  private async detectFeatures(): Promise<void> {
    try {
      const response = await fetch(`${this.baseUrl}/v2/openapi.json`, { headers: this.authHeaders() });
      if (!response.ok) return;
      const document = (await response.json()) as { paths?: Record<string, unknown> };
      this.processes = Object.keys(document.paths ?? {}).some((p) => p.startsWith("/v2/processes"));
      this.changed();
    } catch {
      // Without the document the page shows what every server has.
    }
  }
}
