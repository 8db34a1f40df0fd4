import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { SandboxAgentHttpError } from "../src/index.js";
import { useServer } from "./helpers.js";

const fixture = useServer();

describe("control plane", () => {
  test("health needs no agent connection", async () => {
    const client = fixture.client({ autoConnect: false });
    const health = await client.health();
    assert.equal(health.status, "ok");
    assert.match(health.version, /^\d+\.\d+\.\d+/);
    assert.equal(typeof health.uptimeMs, "number");
    assert.equal(typeof health.connections, "number");
  });

  test("listAgents and getAgent describe the agents; lastInitialize appears after a connection", async () => {
    const client = fixture.client({ autoConnect: false });
    const agents = await client.listAgents();
    const mock = agents.find((a) => a.id === "mock");
    assert.ok(mock, JSON.stringify(agents.map((a) => a.id)));
    assert.equal(mock.source, "builtin");
    assert.equal(mock.installed, true);
    await client.connect();
    await client.disconnect();
    const after = await client.getAgent("mock");
    assert.equal(
      (after.lastInitialize?.agentInfo as { name?: string } | undefined)?.name,
      "sandbox-agent-mock",
    );
  });

  test("installAgent answers as JSON and, with onProgress, as a progress stream", async () => {
    const client = fixture.client({ autoConnect: false });
    const plain = await client.installAgent("mock");
    assert.equal(plain.agent, "mock");
    assert.equal(plain.alreadyInstalled, true);
    assert.equal(plain.state.id, "mock");
    const lines: string[] = [];
    const streamed = await client.installAgent("mock", { onProgress: (line) => lines.push(line) });
    assert.deepEqual({ ...streamed, durationMs: 0 }, { ...plain, durationMs: 0 });
  });

  test("errors carry the problem details", async () => {
    const client = fixture.client({ autoConnect: false });
    const error = await client.getAgent("no-such-agent").catch((e: unknown) => e);
    assert.ok(error instanceof SandboxAgentHttpError, String(error));
    assert.equal(error.status, 404);
    assert.equal(error.problem?.status, 404);
    assert.match(error.problem?.detail ?? "", /no-such-agent/);
    assert.match(error.message, /GET \/v2\/agents\/no-such-agent failed: HTTP 404/);
    const install = await client
      .installAgent("no-such-agent", { onProgress: () => undefined })
      .catch((e: unknown) => e);
    assert.ok(install instanceof SandboxAgentHttpError);
    assert.equal(install.status, 404);
  });

  test("a wrong token is a 401 SandboxAgentHttpError", async () => {
    const client = fixture.client({ autoConnect: false, token: "wrong" });
    const error = await client.health().catch((e: unknown) => e);
    assert.ok(error instanceof SandboxAgentHttpError);
    assert.equal(error.status, 401);
    assert.equal(error.problem?.status, 401);
  });
});
