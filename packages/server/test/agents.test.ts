import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { client, type ClientContext, type InitializeResponse } from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { readSse, serverBin, startServer, tempDir, type RunningServer } from "@sandbox-agent/testkit";
import { mockWith } from "./support/agents.js";

interface AgentInfo {
  id: string;
  installable: boolean;
  installed: boolean;
  version: string | null;
  packages: { name: string; version: string }[];
  env: string[];
  lastInitialize: { protocolVersion: number; agentCapabilities: { loadSession?: boolean } } | null;
}

interface Problem {
  type: string;
  status: number;
  detail: string;
  [key: string]: unknown;
}

/** The example agent in @agentclientprotocol/sdk@1.9.0: a real npm-installed ACP agent that installs in ~2 s. */
const SMALL_AGENT = "sdk-example";
/** Nothing listens on the discard port: npm gets ECONNREFUSED at once (and, here, does not retry). */
const DEAD_REGISTRY = {
  npm_config_registry: "http://127.0.0.1:9",
  npm_config_cache: tempDir("npm-cache-"),
  npm_config_fetch_retries: "0",
};

async function getAgent(server: RunningServer, id: string): Promise<AgentInfo> {
  const res = await fetch(`${server.baseUrl}/v2/agents/${id}`, { headers: server.headers() });
  assert.equal(res.status, 200);
  return (await res.json()) as AgentInfo;
}

function postInstall(server: RunningServer, id: string, accept = "application/json"): Promise<Response> {
  return fetch(`${server.baseUrl}/v2/agents/${id}/install`, {
    method: "POST",
    headers: server.headers({ accept }),
  });
}

async function postInitialize(
  server: RunningServer,
  agent: string,
  meta: Record<string, unknown> = {},
): Promise<Response> {
  return fetch(`${server.baseUrl}/v2/rpc`, {
    method: "POST",
    headers: server.headers({ "content-type": "application/json", accept: "application/json" }),
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: 1,
        clientCapabilities: {},
        _meta: { "sandboxagent.dev": { agent, ...meta } },
      },
    }),
  });
}

async function expectProblem(res: Response, status: number, slug: string): Promise<Problem> {
  assert.equal(res.status, status);
  assert.match(res.headers.get("content-type") ?? "", /^application\/problem\+json/);
  const problem = (await res.json()) as Problem;
  assert.equal(problem.type, `https://sandboxagent.dev/problems/${slug}`);
  return problem;
}

/** Runs `op` on an SDK client connection to `agent` (initialize done), then closes it. */
async function withAgent<T>(
  server: RunningServer,
  agent: string,
  op: (ctx: ClientContext, init: InitializeResponse) => Promise<T>,
  env?: Record<string, string>,
): Promise<T> {
  const app = client({ name: "agents-test" });
  return app.connectWith(createHttpStream(`${server.baseUrl}/v2/rpc`), async (ctx) => {
    const init = await ctx.request("initialize", {
      protocolVersion: 1,
      clientCapabilities: {},
      _meta: { "sandboxagent.dev": { agent, ...(env ? { env } : {}) } },
    });
    return op(ctx, init);
  });
}

describe("agent registry and installation", () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer();
  });
  after(() => server.stop());

  it("GET /v2/agents lists mock as ready and the npm agents as not installed, with their packages and variables", async () => {
    const res = await fetch(`${server.baseUrl}/v2/agents`, { headers: server.headers() });
    assert.equal(res.status, 200);
    const { agents } = (await res.json()) as { agents: AgentInfo[] };
    const byId = new Map(agents.map((a) => [a.id, a]));
    assert.deepEqual(
      ["mock", "claude", "codex", "gemini", "pi", "opencode"].filter((id) => !byId.has(id)),
      [],
    );
    assert.equal(byId.get("mock")!.installable, false);
    assert.equal(byId.get("mock")!.installed, true);
    const claude = byId.get("claude")!;
    assert.equal(claude.installed, false);
    assert.equal(claude.version, null);
    assert.deepEqual(claude.packages, [
      { name: "@agentclientprotocol/claude-agent-acp", version: "0.101.0" },
    ]);
    assert.ok(claude.env.includes("ANTHROPIC_BASE_URL"));
  });

  it("installing mock is a no-op that reports it installed", async () => {
    const res = await postInstall(server, "mock");
    assert.equal(res.status, 200);
    const body = (await res.json()) as { alreadyInstalled: boolean; version: string | null };
    assert.equal(body.alreadyInstalled, true);
    assert.equal(body.version, null);
  });

  it("an unknown agent is a 404 problem", async () => {
    await expectProblem(await postInstall(server, "no-such-agent"), 404, "not-found");
  });

  it("initialize for an agent that is not installed answers 409 saying how to install it", async () => {
    const problem = await expectProblem(await postInitialize(server, "claude"), 409, "agent-not-installed");
    assert.ok(problem.detail.includes("sandbox-agent install-agent claude"), problem.detail);
    assert.ok(problem.detail.includes("POST /v2/agents/claude/install"), problem.detail);
  });

  it(
    "installs a real npm agent with progress over SSE, then again as a no-op",
    { timeout: 120_000 },
    async () => {
      const res = await postInstall(server, SMALL_AGENT, "text/event-stream");
      assert.equal(res.status, 200);
      assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
      const events: { event?: string; data: string }[] = [];
      for await (const event of readSse(res.body!)) events.push(event);
      assert.ok(
        events.some((e) => e.event === "progress"),
        "npm progress lines are streamed",
      );
      const result = events.find((e) => e.event === "result");
      assert.ok(result, JSON.stringify(events.slice(-3)));
      const first = JSON.parse(result.data) as { version: string; alreadyInstalled: boolean };
      assert.equal(first.version, "1.9.0");
      assert.equal(first.alreadyInstalled, false);

      const again = await postInstall(server, SMALL_AGENT);
      assert.equal(again.status, 200);
      assert.equal(((await again.json()) as { alreadyInstalled: boolean }).alreadyInstalled, true);
      const info = await getAgent(server, SMALL_AGENT);
      assert.equal(info.installed, true);
      assert.equal(info.version, "1.9.0");
    },
  );

  it("streams NDJSON when asked: an installed agent gives just the result line", async () => {
    const res = await postInstall(server, SMALL_AGENT, "application/x-ndjson");
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^application\/x-ndjson/);
    const lines = (await res.text())
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { type: string; alreadyInstalled?: boolean });
    assert.deepEqual(
      lines.map((l) => [l.type, l.alreadyInstalled]),
      [["result", true]],
    );
  });

  it(
    "a version the registry does not have is a 502 problem with npm's output",
    { timeout: 60_000 },
    async () => {
      const res = await fetch(`${server.baseUrl}/v2/agents/${SMALL_AGENT}/install`, {
        method: "POST",
        headers: server.headers({ "content-type": "application/json" }),
        body: JSON.stringify({ version: "0.0.0-no-such-version" }),
      });
      const problem = await expectProblem(res, 502, "agent-install-failed");
      assert.ok(JSON.stringify(problem.npmOutput).includes("ETARGET"), JSON.stringify(problem));
      assert.equal(
        (await getAgent(server, SMALL_AGENT)).version,
        "1.9.0",
        "the installed version is untouched",
      );
    },
  );

  it("GET /v2/agents/{id} shows what the agent advertised at its last initialize", async () => {
    assert.equal((await getAgent(server, "mock")).lastInitialize, null);
    const advertised = await withAgent(server, "mock", async (_ctx, init) => init.agentCapabilities);
    const info = await getAgent(server, "mock");
    assert.equal(info.lastInitialize?.protocolVersion, 1);
    assert.equal(info.lastInitialize?.agentCapabilities.loadSession, advertised?.loadSession);
    assert.equal(info.lastInitialize?.agentCapabilities.loadSession, true);
  });
});

describe("auto-install on initialize", () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer({ args: ["--auto-install"] });
  });
  after(() => server.stop());

  it(
    "installs the agent, then initializes it; GET shows the version and its capabilities",
    { timeout: 120_000 },
    async () => {
      assert.equal((await getAgent(server, SMALL_AGENT)).installed, false);
      const init = await withAgent(server, SMALL_AGENT, async (_ctx, result) => result);
      assert.equal(init.agentCapabilities?.loadSession, false);
      const info = await getAgent(server, SMALL_AGENT);
      assert.equal(info.installed, true);
      assert.equal(info.version, "1.9.0");
      assert.equal(info.lastInitialize?.agentCapabilities.loadSession, false);
    },
  );
});

describe("registry unreachable", () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer({ args: ["--auto-install"], env: DEAD_REGISTRY });
  });
  after(() => server.stop());

  it("POST /v2/agents/{id}/install is a 503 problem naming the registry", { timeout: 60_000 }, async () => {
    const problem = await expectProblem(await postInstall(server, SMALL_AGENT), 503, "registry-unreachable");
    assert.ok(JSON.stringify(problem.npmOutput).includes("ECONNREFUSED"), JSON.stringify(problem));
  });

  it(
    "an auto-installing initialize fails with the same problem instead of hanging",
    { timeout: 60_000 },
    async () => {
      await expectProblem(await postInitialize(server, SMALL_AGENT), 503, "registry-unreachable");
    },
  );

  it("the install-agent CLI exits 3 and prints the problem with --json", { timeout: 60_000 }, () => {
    const run = spawnSync(
      process.execPath,
      [serverBin, "install-agent", SMALL_AGENT, "--json", "--data-dir", tempDir("agents-cli-")],
      { env: { ...process.env, ...DEAD_REGISTRY }, encoding: "utf8", timeout: 50_000 },
    );
    assert.equal(run.status, 3, run.stderr);
    const problem = JSON.parse(run.stdout) as Problem;
    assert.equal(problem.status, 503);
    assert.match(run.stderr, /registry could not be reached/);
  });
});

describe("agent environment", () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer({
      config: { agents: { scoped: { ...mockWith(), passEnv: ["SCOPED_TOKEN", "SCOPED_URL"] } } },
      env: { HOST_SECRET: "must-not-leak", SCOPED_URL: "http://from-host" },
    });
  });
  after(() => server.stop());

  /** Asks the mock agent (`env NAME` prompt command) for the value of each variable it sees. */
  const promptEnv = async (ctx: ClientContext, names: string[]): Promise<void> => {
    const { sessionId } = await ctx.request("session/new", { cwd: process.cwd(), mcpServers: [] });
    await ctx.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: names.map((n) => `env ${n}`).join("; ") }],
    });
  };

  it("passes the named variables from the host and the request, and nothing else", async () => {
    const texts: string[] = [];
    const app = client({ name: "env-test" }).onNotification("session/update", ({ params }) => {
      const u = params.update;
      if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") texts.push(u.content.text);
    });
    await app.connectWith(createHttpStream(`${server.baseUrl}/v2/rpc`), async (ctx) => {
      await ctx.request("initialize", {
        protocolVersion: 1,
        clientCapabilities: {},
        _meta: { "sandboxagent.dev": { agent: "scoped", env: { SCOPED_TOKEN: "from-request" } } },
      });
      await promptEnv(ctx, ["HOST_SECRET", "SCOPED_TOKEN", "SCOPED_URL"]);
    });
    const all = texts.join("\n");
    assert.ok(all.includes("HOST_SECRET=(unset)"), all);
    assert.ok(all.includes("SCOPED_TOKEN=from-request"), all);
    assert.ok(all.includes("SCOPED_URL=http://from-host"), all);
  });

  it("refuses request variables the agent's entry does not name, saying how to allow them", async () => {
    const res = await postInitialize(server, "scoped", { env: { LD_PRELOAD: "/evil.so" } });
    const problem = await expectProblem(res, 400, "bad-request");
    assert.ok(problem.detail.includes("LD_PRELOAD"), problem.detail);
    assert.match(problem.detail, /--allow-client-env LD_PRELOAD/);
    assert.match(problem.detail, /"clientEnv"/);
    assert.deepEqual(problem.allowedEnv, ["SCOPED_TOKEN", "SCOPED_URL"]);
  });
});

describe("variables clients may pass (clientEnv, --allow-client-env)", () => {
  let server: RunningServer;
  let open: RunningServer;
  before(async () => {
    server = await startServer({
      config: {
        agents: {
          // No command: adjusts the built-in mock agent.
          mock: { clientEnv: ["PI_API_KEY"] },
          keyed: { ...mockWith(), clientEnv: ["WORKSPACE_TOKEN"] },
        },
      },
      // A variable clients may set is not taken from the server's environment.
      env: { WORKSPACE_TOKEN: "host-value-must-not-leak" },
    });
    open = await startServer({ args: ["--allow-client-env", "*"] });
  });
  after(() => Promise.all([server.stop(), open.stop()]));

  /** What the agent sees of `names`, given `env` in initialize. */
  const seen = async (target: RunningServer, agent: string, env: Record<string, string>, names: string[]) => {
    const texts: string[] = [];
    const app = client({ name: "client-env-test" }).onNotification("session/update", ({ params }) => {
      const u = params.update;
      if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") texts.push(u.content.text);
    });
    await app.connectWith(createHttpStream(`${target.baseUrl}/v2/rpc`), async (ctx) => {
      await ctx.request("initialize", {
        protocolVersion: 1,
        clientCapabilities: {},
        _meta: { "sandboxagent.dev": { agent, env } },
      });
      const { sessionId } = await ctx.request("session/new", { cwd: process.cwd(), mcpServers: [] });
      await ctx.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: names.map((n) => `env ${n}`).join("; ") }],
      });
    });
    return texts.join("\n");
  };

  it("a config entry without a command lets clients pass more variables to a built-in agent", async () => {
    const all = await seen(server, "mock", { PI_API_KEY: "pi-secret" }, ["PI_API_KEY"]);
    assert.ok(all.includes("PI_API_KEY=pi-secret"), all);
    const info = (await (await fetch(`${server.baseUrl}/v2/agents/mock`)).json()) as { clientEnv: string[] };
    assert.ok(info.clientEnv.includes("PI_API_KEY"), JSON.stringify(info));
  });

  it("clientEnv admits a variable from clients without taking it from the server's environment", async () => {
    assert.ok((await seen(server, "keyed", {}, ["WORKSPACE_TOKEN"])).includes("WORKSPACE_TOKEN=(unset)"));
    const all = await seen(server, "keyed", { WORKSPACE_TOKEN: "from-client" }, ["WORKSPACE_TOKEN"]);
    assert.ok(all.includes("WORKSPACE_TOKEN=from-client"), all);
    await expectProblem(await postInitialize(server, "keyed", { env: { OTHER: "x" } }), 400, "bad-request");
  });

  it('--allow-client-env "*" lets clients pass any variable to every agent', async () => {
    const all = await seen(open, "mock", { ANY_NAME: "anything" }, ["ANY_NAME"]);
    assert.ok(all.includes("ANY_NAME=anything"), all);
  });
});

describe("install-agent CLI", () => {
  const installJson = (dataDir: string) =>
    new Promise<{ code: number | null; result: { alreadyInstalled: boolean; version: string } }>(
      (resolve, reject) => {
        const child = spawn(
          process.execPath,
          [serverBin, "install-agent", SMALL_AGENT, "--json", "--data-dir", dataDir],
          {
            stdio: ["ignore", "pipe", "ignore"],
          },
        );
        let out = "";
        child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
        child.once("error", reject);
        child.once("close", (code) => resolve({ code, result: JSON.parse(out) as never }));
      },
    );

  it(
    "two processes installing one agent at once: one installs, the other finds it installed",
    { timeout: 120_000 },
    async () => {
      const dataDir = tempDir("agents-lock-");
      const runs = await Promise.all([installJson(dataDir), installJson(dataDir)]);
      assert.deepEqual(
        runs.map((r) => r.code),
        [0, 0],
      );
      assert.deepEqual(runs.map((r) => r.result.alreadyInstalled).sort(), [false, true]);
      assert.ok(runs.every((r) => r.result.version === "1.9.0"));
    },
  );
});
