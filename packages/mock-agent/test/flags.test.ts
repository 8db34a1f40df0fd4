import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { waitFor } from "@sandbox-agent/testkit";
import { mkdtempSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { RequestError, type InitializeRequest } from "@agentclientprotocol/sdk";
import { killAll, startAgent } from "./helpers.js";

after(killAll);

const INIT: InitializeRequest = { protocolVersion: 1, clientCapabilities: {} };

describe("startup options and process lifecycle", { timeout: 300_000 }, () => {
  it("--exit-on-start exits at once with the code", async () => {
    assert.deepEqual(await startAgent({ flags: ["--exit-on-start", "3"] }).exited, { code: 3, signal: null });
    assert.deepEqual(await startAgent({ env: { MOCK_AGENT_FLAGS: "--exit-on-start" } }).exited, {
      code: 1,
      signal: null,
    });
  });

  it("rejects unknown options with exit code 2", async () => {
    const a = startAgent({ flags: ["--bogus"] });
    assert.deepEqual(await a.exited, { code: 2, signal: null });
    assert.match(a.stderr(), /unknown option --bogus/);
  });

  it("--fail-initialize and --protocol-version", async () => {
    const failing = startAgent({ flags: ["--fail-initialize"] });
    const versioned = startAgent({ flags: ["--protocol-version", "7"] });
    try {
      await assert.rejects(
        failing.agent.request("initialize", INIT),
        (e: unknown) => e instanceof RequestError && e.code === -32602,
      );
      assert.equal((await versioned.agent.request("initialize", INIT)).protocolVersion, 7);
    } finally {
      await Promise.all([failing.stop(), versioned.stop()]);
    }
  });

  it("--hang-initialize never answers", async () => {
    const a = startAgent({ flags: ["--hang-initialize", "--stderr-noise"] });
    try {
      let answered = false;
      void a.agent.request("initialize", INIT).then(
        () => (answered = true),
        () => undefined,
      );
      await waitFor(() => a.stderr().includes("noise: received"), 10_000, "the agent to read initialize");
      // "Never" has no event to wait for. Once the agent has read the request, a second is ample for
      // an agent that answers (it takes a millisecond); a slow machine can only make this pass late.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      assert.equal(answered, false);
      assert.doesNotMatch(a.stderr(), /noise: sent/);
    } finally {
      await a.stop();
    }
  });

  it("--stdin-log records raw input and --stderr-noise logs every line", async () => {
    const log = path.join(mkdtempSync(path.join(os.tmpdir(), "mock-agent-log-")), "stdin.log");
    const a = startAgent({ flags: ["--stdin-log", log, "--stderr-noise"] });
    try {
      await a.agent.request("initialize", INIT);
      await a.agent.request("session/new", { cwd: os.tmpdir(), mcpServers: [] });
      const lines = readFileSync(log, "utf8").trimEnd().split("\n");
      assert.deepEqual(
        lines.map((l) => (JSON.parse(l) as { method: string }).method),
        ["initialize", "session/new"],
      );
      // stderr is its own pipe: its last lines can reach us after the answer on stdout did.
      const noise = (kind: string) => a.stderr().match(new RegExp(`noise: ${kind}`, "g"))?.length ?? 0;
      await waitFor(() => noise("sent") >= 2, 5000, "the noise lines of both answers");
      assert.equal(noise("received"), 2);
      assert.equal(noise("sent"), 2);
    } finally {
      await a.stop();
    }
  });

  it("--ignore-stdin-eof lives on after stdin closes; --cr-in-json writes a bare CR in every JSON line", async () => {
    const a = startAgent({ flags: ["--ignore-stdin-eof", "--cr-in-json"] });
    await a.initialize(); // the SDK's reader takes the CR as the JSON whitespace it is
    assert.ok(a.stdout().startsWith('{\r"jsonrpc"'), JSON.stringify(a.stdout().slice(0, 20)));
    a.child.stdin?.end();
    const outcome = await Promise.race([
      a.exited.then(() => "exited"),
      new Promise((r) => setTimeout(() => r("alive"), 300)),
    ]);
    assert.equal(outcome, "alive");
    a.child.kill("SIGTERM");
    assert.deepEqual(await a.exited, { code: 0, signal: null });
  });

  it("exits 0 on stdin EOF and on SIGTERM; --ignore-sigterm needs SIGKILL", async () => {
    const eof = startAgent();
    await eof.initialize();
    eof.child.stdin?.end();
    assert.deepEqual(await eof.exited, { code: 0, signal: null });

    const term = startAgent();
    await term.initialize();
    term.child.kill("SIGTERM");
    assert.deepEqual(await term.exited, { code: 0, signal: null });

    const stubborn = startAgent({ flags: ["--ignore-sigterm"] });
    await stubborn.initialize();
    stubborn.child.kill("SIGTERM");
    await waitFor(() => stubborn.stderr().includes("ignoring SIGTERM"), 10_000, "the agent to see SIGTERM");
    // It handled the signal and went on: still answering requests.
    await stubborn.agent.request("session/list", {});
    assert.equal(stubborn.child.exitCode, null);
    stubborn.child.kill("SIGKILL");
    assert.equal((await stubborn.exited).signal, "SIGKILL");
  });
});
