import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { SandboxAgentClient, type PermissionRequest } from "sandbox-agent";
import { startServer, type RunningServer } from "@sandbox-agent/testkit";
import { e2eDataDir } from "./data-dir.js";
import { startFakeModel, type FakeModel } from "./fake-model.js";
import type { AgentProfile } from "./profiles.js";
import { FAKE_FILE_CONTENT, skipReason } from "./suite.js";

/** Port offset from the profile's range, so this suite can run beside the transport-level one. */
const PORT_OFFSET = 5;

/**
 * The same agent, driven through the `sandbox-agent` SDK (`SandboxAgentClient`) instead of the raw
 * ACP client: install state through its control-plane helpers, a plain turn, an allowed write,
 * and a cancel through an AbortSignal.
 */
export function sdkSuite(profile: AgentProfile): void {
  const dataDir = e2eDataDir();
  const reason = skipReason(profile.id, dataDir);
  describe(
    `real agent ${profile.id} through the sandbox-agent SDK`,
    { skip: reason, timeout: 300_000 },
    () => {
      const root = path.join(dataDir, "runs", `${profile.id}-sdk`);
      let server: RunningServer;
      let model: FakeModel;
      let client: SandboxAgentClient;
      const texts: string[] = [];
      const permissions: PermissionRequest[] = [];

      before(async () => {
        rmSync(profile.reuseHome ? path.join(root, "work") : root, { recursive: true, force: true });
        mkdirSync(path.join(root, "work"), { recursive: true });
        model = await startFakeModel(profile.firstPort + PORT_OFFSET, root);
        const setup = profile.prepare(path.join(root, "home"), model.url);
        // The SDK has no per-request variables: everything the agent needs comes from the server's environment.
        server = await startServer({
          args: ["--data-dir", dataDir, "--workdir", root],
          env: { ...setup.serverEnv, ...setup.requestEnv },
          timeoutMs: 20_000,
        });
        client = new SandboxAgentClient({
          baseUrl: server.baseUrl,
          agent: profile.id,
          onPermissionRequest: (request) => {
            permissions.push(request);
            const allow = request.options.find((o) => o.kind === "allow_once" || o.kind === "allow_always");
            return allow ? { outcome: "selected", optionId: allow.optionId } : { outcome: "cancelled" };
          },
        });
        client.on("update", ({ update }) => {
          if (update.sessionUpdate === "agent_message_chunk" && update.content.type === "text") {
            texts.push(update.content.text);
          }
        });
      });
      after(async () => {
        await client?.dispose();
        await server?.stop();
        await model?.stop();
      });

      const session = async () => {
        const { sessionId, modes } = await client.newSession({ cwd: path.join(root, "work") });
        const mode = profile.permissionMode;
        if (mode && modes?.availableModes.some((m) => m.id === mode)) {
          await client.setSessionMode({ sessionId, modeId: mode });
        }
        return sessionId;
      };

      it("reports the agent installed, and installAgent is a no-op", async () => {
        const agent = await client.getAgent(profile.id);
        assert.equal(agent.installed, true);
        const result = await client.installAgent(profile.id);
        assert.equal(result.alreadyInstalled, true);
        assert.equal(result.version, agent.version);
      });

      it("runs a plain turn, an allowed write and an aborted turn", { timeout: 180_000 }, async () => {
        const sessionId = await session();
        texts.length = 0;
        const plain = await client.prompt({ sessionId, prompt: "Say hello (PLAIN) NONCE:sdk1" });
        assert.equal(plain.stopReason, "end_turn");
        assert.ok(texts.join("").includes("NONCE:sdk1"), texts.join(""));

        const target = path.join(root, "work", "sdk-allowed.txt");
        const write = await client.prompt({
          sessionId,
          prompt: `Please create the file. WRITE_FILE ${target}`,
        });
        assert.equal(write.stopReason, "end_turn");
        assert.equal(permissions.length > 0, profile.asksPermission);
        assert.ok(existsSync(target), `${target} was not written`);
        assert.equal(readFileSync(target, "utf8"), FAKE_FILE_CONTENT);

        texts.length = 0;
        const abort = new AbortController();
        const slow = client.prompt({
          sessionId,
          prompt: "Stream a long answer please. SLOW",
          signal: abort.signal,
        });
        const deadline = Date.now() + 30_000;
        while (texts.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
        abort.abort();
        assert.equal((await slow).stopReason, "cancelled");
      });
    },
  );
}
