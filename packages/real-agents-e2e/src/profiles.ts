import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { StopReason } from "@agentclientprotocol/sdk";

/** Where an agent's model and config live, for one test run. */
export interface AgentSetup {
  /** Environment of the server process; the server passes on only what the agent's entry names. */
  serverEnv: Record<string, string | undefined>;
  /** Sent per connection in `_meta["sandboxagent.dev"].env`. */
  requestEnv?: Record<string, string>;
}

/** What the suite must know about one real agent: how to point it at the fake model, and its known behaviour. */
export interface AgentProfile {
  id: string;
  /** First port tried for this agent's fake model (each agent gets its own range so suites may run in parallel). */
  firstPort: number;
  prepare(home: string, modelUrl: string): AgentSetup;
  /** Mode set right after `session/new` so that writes ask permission (claude starts in `auto`). */
  permissionMode?: string;
  /** false: the agent runs tools without asking (pi). */
  asksPermission: boolean;
  /** How a turn ends when its only tool call was rejected. */
  rejectedStopReasons: StopReason[];
  /** Advertised methods the agent answers with -32601 anyway (checked, so a fix shows up). */
  unimplemented: string[];
  /** Advertised methods that are broken in the pinned version: skipped, with the reason. */
  knownBroken?: Record<string, string>;
  /** Keep the agent's HOME between runs (only config files are rewritten), when a cold one is too slow. */
  reuseHome?: boolean;
}

/** Variables that would send an agent to a real provider if they leaked from the developer's shell. */
const REAL_CREDENTIALS = {
  ANTHROPIC_API_KEY: undefined,
  ANTHROPIC_AUTH_TOKEN: undefined,
  ANTHROPIC_BASE_URL: undefined,
  CLAUDE_CODE_OAUTH_TOKEN: undefined,
  CLAUDE_CODE_USE_BEDROCK: undefined,
  CLAUDE_CODE_USE_VERTEX: undefined,
  OPENAI_API_KEY: undefined,
  OPENAI_BASE_URL: undefined,
  CODEX_API_KEY: undefined,
  GEMINI_API_KEY: undefined,
  GOOGLE_API_KEY: undefined,
};

const write = (file: string, text: string) => {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
};

export const claude: AgentProfile = {
  id: "claude",
  firstPort: 25010,
  prepare: (home, modelUrl) => {
    const configDir = path.join(home, ".claude");
    mkdirSync(configDir, { recursive: true });
    return {
      // As root, Claude Code refuses some permission modes unless it is told it runs in a sandbox.
      serverEnv: { ...REAL_CREDENTIALS, HOME: home, IS_SANDBOX: "1" },
      // Credentials per request: the way an app hands a user's key to one connection.
      requestEnv: {
        ANTHROPIC_BASE_URL: modelUrl,
        ANTHROPIC_API_KEY: "sk-ant-fake-offline",
        CLAUDE_CONFIG_DIR: configDir,
      },
    };
  },
  permissionMode: "default",
  asksPermission: true,
  rejectedStopReasons: ["end_turn"],
  unimplemented: [],
};

export const codex: AgentProfile = {
  id: "codex",
  firstPort: 25020,
  prepare: (home, modelUrl) => {
    const codexHome = path.join(home, ".codex");
    // A model name Codex knows, so it offers apply_patch; no retries, so a dead model fails fast.
    write(
      path.join(codexHome, "config.toml"),
      [
        'model = "gpt-5.3-codex"',
        'model_provider = "fake"',
        "[model_providers.fake]",
        'name = "Fake"',
        `base_url = "${modelUrl}/v1"`,
        'env_key = "OPENAI_API_KEY"',
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "",
      ].join("\n"),
    );
    return {
      serverEnv: {
        ...REAL_CREDENTIALS,
        HOME: home,
        CODEX_HOME: codexHome,
        OPENAI_API_KEY: "sk-fake-offline",
      },
    };
  },
  asksPermission: true,
  rejectedStopReasons: ["cancelled"],
  unimplemented: [],
};

export const pi: AgentProfile = {
  id: "pi",
  firstPort: 25040,
  prepare: (home, modelUrl) => {
    const agentDir = path.join(home, ".pi", "agent");
    const provider = {
      baseUrl: `${modelUrl}/v1`,
      api: "openai-completions",
      apiKey: "sk-fake-offline",
      compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
      models: [
        { id: "fake-model", name: "Fake Model", reasoning: true, contextWindow: 128000, maxTokens: 4096 },
      ],
    };
    write(path.join(agentDir, "models.json"), JSON.stringify({ providers: { fake: provider } }, null, 2));
    // quietStartup: no startup banner pushed into every session.
    write(
      path.join(agentDir, "settings.json"),
      JSON.stringify({ defaultProvider: "fake", defaultModel: "fake-model", quietStartup: true }),
    );
    return { serverEnv: { ...REAL_CREDENTIALS, HOME: home, PI_CODING_AGENT_DIR: agentDir } };
  },
  asksPermission: false,
  rejectedStopReasons: [],
  unimplemented: ["session/set_model"],
};

export const gemini: AgentProfile = {
  id: "gemini",
  firstPort: 25030,
  prepare: (home, modelUrl) => {
    // API-key auth chosen up front, so session/new needs no `authenticate`; no update checks or telemetry offline.
    const settings = {
      // folderTrust off: otherwise modes other than `default` are refused in the (untrusted) session cwd.
      security: { auth: { selectedType: "gemini-api-key" }, folderTrust: { enabled: false } },
      general: { disableAutoUpdate: true, disableUpdateNag: true },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
    };
    write(path.join(home, ".gemini", "settings.json"), JSON.stringify(settings, null, 2));
    return {
      serverEnv: { ...REAL_CREDENTIALS, HOME: home },
      requestEnv: { GEMINI_API_KEY: "fake-gemini-key", GOOGLE_GEMINI_BASE_URL: modelUrl },
    };
  },
  asksPermission: true,
  rejectedStopReasons: ["end_turn", "cancelled"],
  unimplemented: [],
  knownBroken: {
    // The new process records a fresh chat under the same session id before reading it back.
    "session/load": "gemini 0.61.0 overwrites the stored session in the new process, then finds no history",
  },
};

export const opencode: AgentProfile = {
  id: "opencode",
  firstPort: 25050,
  prepare: (home, modelUrl) => {
    const provider = {
      npm: "@ai-sdk/openai-compatible",
      name: "Fake",
      options: { baseURL: `${modelUrl}/v1`, apiKey: "sk-fake-offline" },
      models: { "fake-model": { name: "Fake Model", tool_call: true } },
    };
    const config = {
      model: "fake/fake-model",
      provider: { fake: provider },
      autoupdate: false,
      share: "disabled",
      // By default opencode edits without asking.
      permission: { edit: "ask", bash: "ask" },
    };
    const file = path.join(home, "opencode.json");
    write(file, JSON.stringify(config, null, 2));
    return {
      serverEnv: {
        ...REAL_CREDENTIALS,
        HOME: home,
        OPENCODE_CONFIG: file,
        OPENCODE_DISABLE_MODELS_FETCH: "1",
        OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
      },
    };
  },
  asksPermission: true,
  rejectedStopReasons: ["end_turn", "cancelled"],
  unimplemented: [],
  // At first start opencode npm-installs its plugin package into ~/.config/opencode (~15 s).
  reuseHome: true,
};
