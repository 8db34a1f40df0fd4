import type { InitializeResponse, McpServer } from "@agentclientprotocol/sdk";
import { placeSkills, type SandboxInstance } from "@sandbox-agent/ai-sandbox";
import { AgentLink } from "./agent-link.js";
import {
  DEFAULTS,
  type AcpCompatibleConfig,
  type AcpLaunchContext,
  type AcpModelOptions,
  type AcpSessionTransport,
} from "./config.js";
import { AcpHarnessError, errorMessage } from "./errors.js";
import { McpToolBridge, type BridgeTool } from "./mcp-bridge.js";
import { recordSession, storedSession, type ThreadSession } from "./session-records.js";
import type { SessionPool, WarmSession } from "./session-pool.js";
import { stdioTransport } from "./transports/stdio.js";

export interface SessionRequest<TOptions extends object> {
  key: string;
  /** The chat thread (the session's record id with a `store`). */
  threadId: string;
  model: string;
  sandbox: SandboxInstance;
  modelOptions: AcpModelOptions<TOptions> | undefined;
  tools: ReadonlyArray<BridgeTool>;
  signal: AbortSignal;
  createId: (prefix: string) => string;
}

export interface AcquiredSession {
  session: WarmSession;
  /** The agent already holds the conversation (warm process, or a successful resume). */
  resumed: boolean;
  warnings: string[];
}

type AnyConfig = AcpCompatibleConfig<ReadonlyArray<string>, object>;

/** Reuses the thread's warm session, or starts an agent and opens (or resumes) a session. */
export async function acquireSession<TOptions extends object>(
  config: AnyConfig,
  pool: SessionPool,
  request: SessionRequest<TOptions>,
): Promise<AcquiredSession> {
  const warm = pool.get(request.key);
  const wanted = request.modelOptions?.sessionId;
  if (warm && (wanted === undefined || wanted === warm.sessionId)) {
    warm.tools = request.tools;
    return { session: warm, resumed: true, warnings: [] };
  }
  if (warm) await pool.evict(warm);
  return coldStart(config, pool, request);
}

async function coldStart<TOptions extends object>(
  config: AnyConfig,
  pool: SessionPool,
  request: SessionRequest<TOptions>,
): Promise<AcquiredSession> {
  const { sandbox, modelOptions } = request;
  const cwd = modelOptions?.cwd ?? config.cwd ?? sandbox.workdir;
  const thread: ThreadSession | undefined = config.store && {
    store: config.store,
    threadId: request.threadId,
    harness: config.name,
    sandboxKey: sandbox.id,
  };
  const sessionId = modelOptions?.sessionId ?? (thread && (await storedSession(thread)));
  const warnings = await placeSkills(sandbox, { skillsDir: config.skillsDir });
  const link = await AgentLink.open({
    name: config.name,
    transport: await openTransport(config, request, cwd),
    initializeTimeoutMs: config.initializeTimeoutMs ?? DEFAULTS.initializeTimeoutMs,
    authMode: modelOptions?.authMode ?? config.authMode ?? "api-key",
    authMethodId: modelOptions?.authMethodId ?? config.authMethodId,
    onExtNotification: config.onExtNotification,
  });
  let bridge: McpToolBridge | undefined;
  try {
    const holder: { session?: WarmSession } = {};
    bridge = request.tools.length > 0 ? await startBridge(config.name, holder, request) : undefined;
    const mcpServers = [
      ...(bridge ? [bridge.serverEntry(link.init.agentCapabilities?.mcpCapabilities?.http === true)] : []),
      ...supportedServers(sandbox.workspace.mcpServers, link.init),
    ];
    const opened = await openSession(link, { cwd, mcpServers, sessionId, name: config.name });
    warnings.push(...opened.warnings);
    if (thread) await recordSession(thread, opened.sessionId, request.model);
    const session: WarmSession = {
      key: request.key,
      link,
      sessionId: opened.sessionId,
      cwd,
      bridge,
      tools: request.tools,
      turn: undefined,
      idleTimer: undefined,
    };
    holder.session = session;
    pool.add(session);
    return { session, resumed: opened.resumed, warnings };
  } catch (err) {
    await Promise.all([link.close(), bridge?.close()]);
    throw err;
  }
}

async function openTransport<TOptions extends object>(
  config: AnyConfig,
  request: SessionRequest<TOptions>,
  cwd: string,
): Promise<AcpSessionTransport> {
  const env = { ...request.sandbox.env, ...config.env };
  const ctx: AcpLaunchContext<string, object> = {
    model: request.model,
    cwd,
    harnessCwd: cwd,
    sandbox: request.sandbox,
    env,
    modelOptions: request.modelOptions,
    signal: request.signal,
  };
  if (config.openTransport) return config.openTransport(ctx);
  // An explicit command runs inside the sandbox whatever the provider (the remote one through its
  // process API), even when the sandbox also offers a native ACP connection (a container with the
  // server in it has both): the user said how to start the agent. Without one, the provider's own
  // ACP connection serves the agent named `name`.
  if (config.command) {
    return stdioTransport(request.sandbox, config.command(ctx), {
      cwd,
      ...(config.env ? { env: config.env } : {}),
    });
  }
  if (request.sandbox.openAcp) {
    const stream = await request.sandbox.openAcp({
      agent: config.name,
      ...(config.env ? { env: config.env } : {}),
    });
    return { kind: "stream", stream, dispose: () => stream.close() };
  }
  throw new AcpHarnessError("config", `${config.name}: set \`command\` or \`openTransport\``);
}

function startBridge<TOptions extends object>(
  name: string,
  holder: { session?: WarmSession },
  request: SessionRequest<TOptions>,
): Promise<McpToolBridge> {
  return McpToolBridge.start({
    name: `${name}-chat-tools`,
    tools: () => holder.session?.tools ?? request.tools,
    onCall: (call) => {
      const turn = holder.session?.turn;
      if (turn && !turn.finished) turn.onToolCall(call);
      else call.fail("No chat turn is running to execute this tool");
    },
    createId: () => request.createId("bridged"),
  });
}

/** Workspace MCP servers, minus transports the agent did not advertise (stdio is the baseline). */
function supportedServers(servers: ReadonlyArray<McpServer>, init: InitializeResponse): McpServer[] {
  const caps = init.agentCapabilities?.mcpCapabilities;
  return servers.filter((server) => {
    if ("type" in server && server.type === "http") return caps?.http === true;
    if ("type" in server && server.type === "sse") return caps?.sse === true;
    return true;
  });
}

interface OpenedSession {
  sessionId: string;
  resumed: boolean;
  warnings: string[];
}

/**
 * session/new, or a resume of `sessionId`: session/load when `loadSession` is
 * advertised (its history replay is not forwarded: no turn is attached yet),
 * else session/resume when advertised. A resume that cannot happen is reported
 * as a warning and falls back to a new session with the full history.
 */
async function openSession(
  link: AgentLink,
  args: { cwd: string; mcpServers: McpServer[]; sessionId: string | undefined; name: string },
): Promise<OpenedSession> {
  const { cwd, mcpServers, sessionId, name } = args;
  const caps = link.init.agentCapabilities;
  const warnings: string[] = [];
  if (sessionId !== undefined) {
    try {
      if (caps?.loadSession) {
        await link.untilDeath(
          link.agent.request("session/load", { sessionId, cwd, mcpServers }),
          "session/load",
        );
        return { sessionId, resumed: true, warnings };
      }
      if (caps?.sessionCapabilities?.resume) {
        await link.untilDeath(
          link.agent.request("session/resume", { sessionId, cwd, mcpServers }),
          "session/resume",
        );
        return { sessionId, resumed: true, warnings };
      }
      warnings.push(
        `${name}: the agent supports neither session/load nor session/resume; started a new session instead of ${sessionId}`,
      );
    } catch (err) {
      if (link.dead) throw err;
      warnings.push(
        `${name}: could not resume session ${sessionId} (${errorMessage(err)}); started a new session`,
      );
    }
  }
  try {
    const created = await link.untilDeath(
      link.agent.request("session/new", { cwd, mcpServers }),
      "session/new",
    );
    return { sessionId: created.sessionId, resumed: false, warnings };
  } catch (err) {
    if (err instanceof AcpHarnessError) throw err;
    throw new AcpHarnessError(
      "session_failed",
      `${name}: session/new failed: ${errorMessage(err)}${link.stderrSuffix()}`,
    );
  }
}
