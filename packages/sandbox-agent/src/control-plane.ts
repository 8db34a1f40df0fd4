/** Health, agent catalogue and agent installation endpoints. */
import { SandboxAgentHttpError, type ProblemDetails } from "./errors.js";
import type { HttpTransport } from "./http.js";
import { isRecord } from "./metadata.js";

export interface HealthStatus {
  status: string;
  version: string;
  uptimeMs: number;
  /** Open agent connections. */
  connections: number;
  /** Working directory of the server's agents: the default `cwd` for new sessions. */
  workdir: string;
  /** Root of the file API: `/v2/fs/*` paths are relative to it (absent from servers before 0.1). */
  fsRoot?: string;
}

export interface AgentPackage {
  name: string;
  version: string;
}

/** One agent the server can run. */
export interface AgentDescription {
  id: string;
  name: string;
  source: "builtin" | "config";
  installable: boolean;
  installed: boolean;
  version: string | null;
  packages: AgentPackage[];
  /** Environment variables the agent may receive. */
  env: string[];
  notes: string | null;
  /** What the agent reported the last time it was started here, if ever. */
  lastInitialize: Record<string, unknown> | null;
}

export interface InstallAgentOptions {
  /** Version of the agent's main package (default: the server's pinned version). */
  version?: string;
  /** Receives installer output lines as they happen. */
  onProgress?: (line: string) => void;
  signal?: AbortSignal;
}

export interface InstallResult {
  agent: string;
  version: string | null;
  alreadyInstalled: boolean;
  durationMs: number;
  packages: AgentPackage[];
  /** The agent as listed after the install. */
  state: AgentDescription;
}

export class ControlPlane {
  constructor(private readonly http: HttpTransport) {}

  health(): Promise<HealthStatus> {
    return this.http.json<HealthStatus>({ method: "GET", path: "/v2/health" });
  }

  async listAgents(): Promise<AgentDescription[]> {
    const body = await this.http.json<{ agents: AgentDescription[] }>({ method: "GET", path: "/v2/agents" });
    return body.agents;
  }

  getAgent(agentId: string): Promise<AgentDescription> {
    return this.http.json<AgentDescription>({
      method: "GET",
      path: `/v2/agents/${encodeURIComponent(agentId)}`,
    });
  }

  /** Installs (or confirms) the agent's packages on the server. */
  async installAgent(agentId: string, options: InstallAgentOptions = {}): Promise<InstallResult> {
    const request = {
      method: "POST" as const,
      path: `/v2/agents/${encodeURIComponent(agentId)}/install`,
      json: options.version ? { version: options.version } : {},
      signal: options.signal,
    };
    if (!options.onProgress) return this.http.json<InstallResult>(request);
    const response = await this.http.send({ ...request, headers: { accept: "application/x-ndjson" } });
    return readInstallEvents(response, options.onProgress, this.http.url(request.path));
  }
}

/** Reads the NDJSON progress stream (`progress`, then one `result` or `error`). */
async function readInstallEvents(
  response: Response,
  onProgress: (line: string) => void,
  url: string,
): Promise<InstallResult> {
  let result: InstallResult | undefined;
  for await (const event of ndjson(response)) {
    if (event.type === "progress" && typeof event.line === "string") onProgress(event.line);
    else if (event.type === "result") result = stripType(event) as unknown as InstallResult;
    else if (event.type === "error") {
      const problem = isRecord(event.problem) ? (event.problem as ProblemDetails) : undefined;
      throw new SandboxAgentHttpError({
        method: "POST",
        url,
        status: problem?.status ?? 500,
        body: JSON.stringify(event),
        problem,
      });
    }
  }
  if (!result) throw new Error(`install stream ended without a result (${url})`);
  return result;
}

function stripType(event: Record<string, unknown>): Record<string, unknown> {
  const { type: _type, ...rest } = event;
  return rest;
}

async function* ndjson(response: Response): AsyncGenerator<Record<string, unknown>> {
  if (!response.body) return;
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buffer += value;
    let newline: number;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, newline).trim();
      buffer = buffer.slice(newline + 1);
      if (!line) continue;
      const value: unknown = JSON.parse(line);
      if (isRecord(value)) yield value;
    }
  }
}
