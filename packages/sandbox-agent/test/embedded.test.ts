import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { tempDir, waitFor } from "@sandbox-agent/testkit";
import { SandboxAgent } from "../src/index.js";
import { messageTexts, record } from "./helpers.js";

const SDK_ENTRY = pathToFileURL(fileURLToPath(new URL("../src/index.js", import.meta.url))).href;

function alive(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Pids whose environment contains `marker` (Linux /proc). */
function processesWith(marker: string): number[] {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/environ`, "latin1").includes(marker);
      } catch {
        return false;
      }
    })
    .map(Number);
}

/**
 * Runs a Node script that starts an embedded server, opens a session (so an agent process runs),
 * prints the server pid, then does `then`. Server and agent carry `marker` in their environment.
 */
async function childWithServer(
  then: string,
  marker: string,
): Promise<{ serverPid: number; exit: Promise<unknown>; kill(): void }> {
  // The server passes MOCK_AGENT_FLAGS on to the mock agent; --stdin-log makes the value unique.
  const env = { MOCK_AGENT_FLAGS: `--stdin-log ${path.join(tempDir(), marker)}` };
  const script = `
    import { SandboxAgent } from ${JSON.stringify(SDK_ENTRY)};
    const agent = await SandboxAgent.start({ agent: "mock", env: ${JSON.stringify(env)} });
    await agent.newSession({ cwd: "/tmp" });
    console.log("PID " + agent.server.pid);
    ${then}
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exit = new Promise((resolve) => child.once("exit", resolve));
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
  const serverPid = Number((await waitFor(() => /PID (\d+)/.exec(out), 15_000, "child's server pid"))[1]);
  return { serverPid, exit, kill: () => child.kill("SIGTERM") };
}

describe("embedded mode", () => {
  test("start() runs a private server with a random token and returns a connected client", async () => {
    const marker = `sdk-embedded-dispose-${process.pid}-${Date.now()}`;
    const env = { MOCK_AGENT_FLAGS: `--stdin-log ${path.join(tempDir(), marker)}` };
    const agent = await SandboxAgent.start({ agent: "mock", env });
    const pid = agent.server.pid;
    try {
      assert.equal(agent.connected, true);
      assert.ok(alive(pid), "server process running");
      assert.match(agent.baseUrl, /^http:\/\/127\.0\.0\.1:\d+$/);
      const anonymous = await fetch(`${agent.baseUrl}/v2/health`);
      assert.equal(anonymous.status, 401, "the server requires the generated token");
      const authorized = await fetch(`${agent.baseUrl}/v2/health`, {
        headers: { authorization: `Bearer ${agent.server.token}` },
      });
      assert.equal(authorized.status, 200);
      await authorized.body?.cancel();
      assert.ok(agent.server.token.length >= 32, "a long random token");
      await anonymous.body?.cancel();
      const events = record(agent);
      const { sessionId } = await agent.newSession({ cwd: "/tmp" });
      await agent.prompt({ sessionId, prompt: "echo embedded" });
      assert.deepEqual(messageTexts(events, sessionId), ["embedded"]);
    } finally {
      await agent.dispose();
    }
    assert.equal(agent.server.running, false);
    assert.equal(alive(pid), false, "server process gone after dispose()");
    await waitFor(() => processesWith(marker).length === 0, 5000, "agent process gone after dispose()");
  });

  test("the server starts without NODE_EXTRA_CA_CERTS, which it keeps for its children", async () => {
    const ca = path.join(tempDir(), "extra-ca.pem");
    await using agent = await SandboxAgent.start({ agent: "mock", env: { NODE_EXTRA_CA_CERTS: ca } });
    // The environment the server process started with (Node reads the variable only then).
    const environ = readFileSync(`/proc/${agent.server.pid}/environ`, "latin1").split("\0");
    assert.ok(!environ.some((v) => v.startsWith("NODE_EXTRA_CA_CERTS=")), "not in the server's start env");
    assert.ok(environ.includes(`SANDBOX_AGENT_NODE_EXTRA_CA_CERTS=${ca}`), "moved under the server's name");
  });

  test("await using disposes the server", async () => {
    let pid: number | undefined;
    {
      await using agent = await SandboxAgent.start({ agent: "mock" });
      pid = agent.server.pid;
      assert.ok(alive(pid));
    }
    assert.equal(alive(pid), false);
  });

  test("a server binary that does not start fails start() with its output", async () => {
    const bogus = fileURLToPath(new URL("./no-such-server.js", import.meta.url));
    await assert.rejects(
      SandboxAgent.start({ agent: "mock", serverBin: bogus, startTimeoutMs: 5000 }),
      (error: Error) => {
        assert.match(error.message, /exited .* before listening/);
        assert.match(error.message, /Cannot find module/);
        return true;
      },
    );
  });

  test("the server is killed when the parent process exits without dispose()", async () => {
    const marker = `sdk-embedded-exit-${process.pid}-${Date.now()}`;
    const child = await childWithServer("process.exit(0);", marker);
    await child.exit;
    await waitFor(() => !alive(child.serverPid), 5000, "server gone after parent exit");
    await waitFor(() => processesWith(marker).length === 0, 5000, "agent gone too");
  });

  test("the server is killed when the parent process is terminated by a signal", async () => {
    const marker = `sdk-embedded-signal-${process.pid}-${Date.now()}`;
    const child = await childWithServer("setInterval(() => {}, 1000);", marker);
    assert.ok(processesWith(marker).length >= 2, "server and agent carry the marker");
    assert.ok(alive(child.serverPid));
    child.kill();
    const exitCode = await child.exit;
    assert.equal(exitCode, null, "the parent still died of its signal");
    await waitFor(() => !alive(child.serverPid), 5000, "server gone after parent SIGTERM");
    await waitFor(() => processesWith(marker).length === 0, 5000, "agent gone too");
  });
});
