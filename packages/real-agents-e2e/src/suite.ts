import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { NewSessionResponse, SessionConfigOption, SessionNotification } from "@agentclientprotocol/sdk";
import { startServer, type RunningServer } from "@sandbox-agent/testkit";
import { AgentClient } from "./agent-client.js";
import { e2eDataDir, listAgents, type ListedAgent } from "./data-dir.js";
import { startFakeModel, type FakeModel } from "./fake-model.js";
import type { AgentProfile, AgentSetup } from "./profiles.js";

/** What the fake model writes when it calls a file-writing tool. */
export const FAKE_FILE_CONTENT = "hello from the fake model\n";
const TURN_TIMEOUT_MS = 120_000;
const CANCEL_DEADLINE_MS = 10_000;

/** Why the suite for an agent is skipped, or undefined when the agent is installed. */
export function skipReason(agentId: string, dataDir = e2eDataDir()): string | undefined {
  let agent: ListedAgent | undefined;
  try {
    agent = listAgents(dataDir).find((a) => a.id === agentId);
  } catch (error) {
    return `cannot list agents in ${dataDir}: ${(error as Error).message}`;
  }
  if (agent?.installed) return undefined;
  return `${agentId} is not installed in ${dataDir} (run \`npm run test:agents\`, or \`sandbox-agent install-agent ${agentId} --data-dir ${dataDir}\`)`;
}

interface Run {
  server: RunningServer;
  model: FakeModel;
  setup: AgentSetup;
  root: string;
  clients: AgentClient[];
}

function nonce(): string {
  return Math.random().toString(36).slice(2, 10);
}

/**
 * The acceptance scenario for one real agent: through the real server and the ACP SDK over HTTP,
 * against the scripted fake model. Steps the agent does not advertise are skipped with a reason.
 */
export function realAgentSuite(profile: AgentProfile): void {
  const dataDir = e2eDataDir();
  const reason = skipReason(profile.id, dataDir);
  if (reason) process.stderr.write(`# real-agents-e2e: skipping ${profile.id}: ${reason}\n`);

  describe(`real agent ${profile.id} through the server`, { skip: reason, timeout: 600_000 }, () => {
    const run = {} as Run;
    let first: { client: AgentClient; session: NewSessionResponse; cwd: string } | undefined;

    before(async () => {
      run.root = path.join(dataDir, "runs", profile.id);
      rmSync(profile.reuseHome ? path.join(run.root, "work") : run.root, { recursive: true, force: true });
      mkdirSync(path.join(run.root, "home"), { recursive: true });
      run.model = await startFakeModel(profile.firstPort, run.root);
      run.setup = profile.prepare(path.join(run.root, "home"), run.model.url);
      run.server = await startServer({
        args: ["--data-dir", dataDir, "--workdir", run.root],
        env: run.setup.serverEnv,
        timeoutMs: 20_000,
      });
      run.clients = [];
    });
    after(async () => {
      run.clients?.forEach((c) => c.close());
      await run.server?.stop();
      await run.model?.stop();
    });

    const open = async (): Promise<AgentClient> => {
      const client = await AgentClient.open({
        baseUrl: run.server.baseUrl,
        agent: profile.id,
        env: run.setup.requestEnv,
      });
      run.clients.push(client);
      return client;
    };
    const newSession = async (client: AgentClient, name: string) => {
      // Distinct basenames: gemini keys its session store by the cwd's basename.
      const cwd = path.join(run.root, "work", `${profile.id}-${name}`);
      mkdirSync(cwd, { recursive: true });
      const session = await client.ctx.request("session/new", { cwd, mcpServers: [] });
      const mode = profile.permissionMode;
      if (mode && session.modes?.availableModes.some((m) => m.id === mode)) {
        await client.ctx.request("session/set_mode", { sessionId: session.sessionId, modeId: mode });
      }
      return { session, cwd };
    };
    const firstSession = () => {
      assert.ok(first, "the plain-turn test creates the session the later steps use");
      return first;
    };

    it("initialize reports capabilities, and GET /v2/agents/{id} shows them with the installed version", async () => {
      const client = await open();
      assert.equal(client.initialize.protocolVersion, 1);
      assert.equal(typeof client.initialize.agentCapabilities, "object");
      const res = await fetch(`${run.server.baseUrl}/v2/agents/${profile.id}`, {
        headers: run.server.headers(),
      });
      assert.equal(res.status, 200);
      const info = (await res.json()) as {
        installed: boolean;
        version: string | null;
        lastInitialize: { agentCapabilities: { loadSession?: boolean } } | null;
      };
      assert.equal(info.installed, true);
      assert.match(info.version ?? "", /^\d+\.\d+\.\d+/);
      assert.equal(
        info.lastInitialize?.agentCapabilities.loadSession,
        client.initialize.agentCapabilities?.loadSession,
      );
      const { session, cwd } = await newSession(client, "main");
      first = { client, session, cwd };
    });

    it("answers a plain text turn", { timeout: TURN_TIMEOUT_MS }, async () => {
      const { client, session } = firstSession();
      const tag = nonce();
      const turn = await client.prompt(session.sessionId, `Say hello (PLAIN) NONCE:${tag}`);
      assert.equal(turn.stopReason, "end_turn");
      assert.ok(turn.text.includes("PLAIN_OK"), `agent text: ${JSON.stringify(turn.text)}`);
      assert.ok(turn.text.includes(`NONCE:${tag}`), `agent text: ${JSON.stringify(turn.text)}`);
    });

    it(
      "writes a file in the session cwd when the permission is allowed",
      { timeout: TURN_TIMEOUT_MS },
      async () => {
        const { client, session, cwd } = firstSession();
        const target = path.join(cwd, "allowed.txt");
        client.permissionPolicy = "allow";
        const turn = await client.prompt(session.sessionId, `Please create the file. WRITE_FILE ${target}`);
        assert.equal(turn.stopReason, "end_turn");
        if (profile.asksPermission)
          assert.ok(turn.permissions.length >= 1, "expected session/request_permission");
        else assert.equal(turn.permissions.length, 0);
        assert.ok(existsSync(target), `${target} was not written`);
        assert.equal(readFileSync(target, "utf8"), FAKE_FILE_CONTENT);
        assert.ok(
          completedToolCall(turn.updates),
          `expected a completed tool call: ${updateKinds(turn.updates)}`,
        );
      },
    );

    it(
      "does not write the file when the permission is rejected",
      {
        timeout: TURN_TIMEOUT_MS,
        skip: profile.asksPermission ? false : `${profile.id} never asks permission`,
      },
      async () => {
        const client = await open();
        const { session, cwd } = await newSession(client, "rejected");
        const target = path.join(cwd, "rejected.txt");
        client.permissionPolicy = "reject";
        const turn = await client.prompt(session.sessionId, `Please create the file. WRITE_FILE ${target}`);
        assert.ok(turn.permissions.length >= 1, "expected session/request_permission");
        assert.ok(profile.rejectedStopReasons.includes(turn.stopReason), `stopReason ${turn.stopReason}`);
        assert.equal(existsSync(target), false, `${target} was written although the permission was rejected`);
      },
    );

    it(
      "session/cancel mid-turn ends it with stopReason cancelled; the next turn is answered",
      {
        timeout: TURN_TIMEOUT_MS,
      },
      async () => {
        const { client, session } = firstSession();
        const seen = client.updates.length;
        const turn = client.prompt(session.sessionId, "Stream a long answer please. SLOW");
        await client.waitForUpdate(
          (u) =>
            client.updates.indexOf(u) >= seen &&
            u.sessionId === session.sessionId &&
            u.update.sessionUpdate === "agent_message_chunk",
        );
        const cancelledAt = Date.now();
        await client.ctx.notify("session/cancel", { sessionId: session.sessionId });
        const result = await turn;
        assert.equal(result.stopReason, "cancelled");
        assert.ok(Date.now() - cancelledAt < CANCEL_DEADLINE_MS, "cancel took too long");
        const tag = nonce();
        const next = await client.prompt(session.sessionId, `Say hello again (PLAIN) NONCE:${tag}`);
        assert.equal(next.stopReason, "end_turn");
        assert.ok(next.text.includes(`NONCE:${tag}`), `answer after cancel: ${JSON.stringify(next.text)}`);
      },
    );

    optionalSteps(profile, firstSession, open);
  });
}

/** A tool call reported as completed (gemini announces a tool only through its permission request, then updates it). */
function completedToolCall(updates: SessionNotification[]): boolean {
  return updates.some(
    (u) =>
      (u.update.sessionUpdate === "tool_call" || u.update.sessionUpdate === "tool_call_update") &&
      u.update.status === "completed",
  );
}

function updateKinds(updates: SessionNotification[]): string {
  return updates.map((u) => u.update.sessionUpdate).join(",");
}

type First = () => { client: AgentClient; session: NewSessionResponse; cwd: string };

/** list / modes / models / config / load / resume: each runs only if the agent advertised it. */
function optionalSteps(profile: AgentProfile, first: First, open: () => Promise<AgentClient>): void {
  it("session/list finds the session (if advertised)", async (t) => {
    const { client, session, cwd } = first();
    if (!client.initialize.agentCapabilities?.sessionCapabilities?.list)
      return t.skip("session/list not advertised");
    const list = await client.ctx.request("session/list", { cwd });
    assert.ok(
      list.sessions.some((s) => s.sessionId === session.sessionId),
      JSON.stringify(list),
    );
  });

  it("session/set_mode switches to another mode and back (if modes are advertised)", async (t) => {
    const { client, session } = first();
    const modes = session.modes;
    const other = modes?.availableModes.find((m) => m.id !== modes.currentModeId);
    if (!modes || !other) return t.skip("fewer than two modes advertised");
    await client.ctx.request("session/set_mode", { sessionId: session.sessionId, modeId: other.id });
    await client.ctx.request("session/set_mode", {
      sessionId: session.sessionId,
      modeId: modes.currentModeId,
    });
  });

  it("session/set_model (if models are advertised)", async (t) => {
    const { client, session } = first();
    const models = (
      session as { models?: { currentModelId: string; availableModels: { modelId: string }[] } }
    ).models;
    if (!models || models.availableModels.length === 0) return t.skip("no models advertised");
    const call = client.ctx.request("session/set_model", {
      sessionId: session.sessionId,
      modelId: models.currentModelId,
    });
    if (profile.unimplemented.includes("session/set_model")) {
      await assert.rejects(call, (e: { code?: number }) => e.code === -32601);
    } else {
      await call;
    }
  });

  it("session/set_config_option changes a select option (if config options are advertised)", async (t) => {
    const { client, session } = first();
    const choice = configChoice(session.configOptions ?? []);
    if (!choice) return t.skip("no select config option with a second value");
    const result = await client.ctx.request("session/set_config_option", {
      sessionId: session.sessionId,
      configId: choice.id,
      value: choice.value,
    });
    const after = result.configOptions.find((o) => o.id === choice.id);
    assert.equal(after?.currentValue, choice.value);
  });

  for (const method of ["session/load", "session/resume"] as const) {
    it(
      `${method} in a new agent process continues the session (if advertised)`,
      { timeout: TURN_TIMEOUT_MS },
      async (t) => {
        const { client, session, cwd } = first();
        const caps = client.initialize.agentCapabilities;
        const advertised = method === "session/load" ? caps?.loadSession : caps?.sessionCapabilities?.resume;
        if (!advertised) return t.skip(`${method} not advertised`);
        const broken = profile.knownBroken?.[method];
        if (broken) return t.skip(broken);
        const fresh = await open();
        const params = { sessionId: session.sessionId, cwd, mcpServers: [] };
        // opencode's backend sometimes is not up when a fresh process gets its first session request and
        // answers -32603 "OpenCode service failure"; one retry after a pause tells that from a real failure.
        await fresh.ctx.request(method, params).catch(async (error: { code?: number }) => {
          if (error.code !== -32603) throw error;
          await new Promise((r) => setTimeout(r, 3000));
          return fresh.ctx.request(method, params);
        });
        if (method === "session/load") {
          assert.ok(
            fresh.updates.some(
              (u) => u.sessionId === session.sessionId && u.update.sessionUpdate === "user_message_chunk",
            ),
            "session/load replays the history",
          );
        }
        const tag = nonce();
        const turn = await fresh.prompt(session.sessionId, `Say hello after ${method} (PLAIN) NONCE:${tag}`);
        assert.equal(turn.stopReason, "end_turn");
        assert.ok(turn.text.includes(`NONCE:${tag}`), JSON.stringify(turn.text));
        fresh.close();
      },
    );
  }
}

/** A select option other than mode and model (those have their own steps), with a value it does not have yet. */
function configChoice(options: SessionConfigOption[]): { id: string; value: string } | undefined {
  for (const option of options) {
    if (option.type !== "select" || option.category === "mode" || option.category === "model") continue;
    if (option.id === "mode" || option.id === "model") continue;
    const values = option.options.flatMap((o) => ("options" in o ? o.options : [o])).map((o) => o.value);
    const value = values.find((v) => v !== option.currentValue);
    if (value !== undefined) return { id: option.id, value };
  }
  return undefined;
}
