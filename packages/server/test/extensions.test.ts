import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startServer, tempDir, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { filteredMock, mockWith, received, stdinLog } from "./support/agents.js";
import { agentText, RawConnection, type RpcMessage, type SseReader } from "./support/rpc.js";

const META = "sandboxagent.dev";
const loggedLog = stdinLog();
const noListLog = stdinLog();

/** A real agent process without `sessionCapabilities.list`/`close`: the mock, minus those in its initialize answer. */
function noListAgent(): { command: string; args: string[] } {
  const rewrite = `(line) => {
    if (!line.includes('"agentCapabilities"')) return line;
    const answer = JSON.parse(line);
    delete answer.result.agentCapabilities.sessionCapabilities.list;
    delete answer.result.agentCapabilities.sessionCapabilities.close;
    return JSON.stringify(answer);
  }`;
  return filteredMock(rewrite, "--stdin-log", noListLog);
}

function receivedFor(log: string, method: string, sessionId: string): RpcMessage[] {
  return received(log).filter((m) => m.method === method && m.params?.sessionId === sessionId);
}

function sandboxMeta(value: unknown): Record<string, unknown> {
  const meta = (value as { _meta?: Record<string, unknown> } | undefined)?._meta;
  return (meta?.[META] ?? {}) as Record<string, unknown>;
}

interface ListEntry {
  sessionId: string;
  title?: string | null;
  cwd?: string | null;
  _meta?: Record<string, unknown>;
}

async function listEntry(conn: RawConnection, sse: SseReader, sessionId: string): Promise<ListEntry> {
  const response = await conn.call(sse, "session/list", {});
  assert.equal(response.error, undefined, JSON.stringify(response.error));
  const entry = (response.result!.sessions as ListEntry[]).find((s) => s.sessionId === sessionId);
  assert.ok(entry, `session ${sessionId} missing from ${JSON.stringify(response.result)}`);
  return entry;
}

function updatesFor(sse: SseReader, sessionId: string): RpcMessage[] {
  return sse.messages().filter((m) => m.method === "session/update" && m.params?.sessionId === sessionId);
}

describe("Sandbox extensions", () => {
  let server: RunningServer;
  let conn: RawConnection;
  let sse: SseReader;

  before(async () => {
    server = await startServer({
      config: {
        agents: {
          logged: mockWith("--stdin-log", loggedLog),
          nolist: noListAgent(),
          persisted: { ...mockWith(), env: { MOCK_AGENT_STATE_DIR: tempDir("mock-state-") } },
        },
      },
    });
    conn = await RawConnection.open(server, "logged");
    sse = await conn.openSse();
  });
  after(async () => {
    sse.close();
    await server.stop();
  });

  it("advertises the extensions in the initialize result, keeping the agent's capabilities", () => {
    const capabilities = conn.initialize.result!.agentCapabilities as Record<string, unknown>;
    const extensions = sandboxMeta(capabilities).extensions as Record<string, unknown>;
    for (const key of [
      "sessionDetach",
      "sessionTerminate",
      "sessionEndedNotification",
      "sessionListModels",
      "sessionSetMetadata",
      "agentUnparsedNotification",
    ])
      assert.equal(extensions[key], true, key);
    assert.deepEqual(
      new Set(extensions.methods as string[]),
      new Set([
        "_sandboxagent/session/detach",
        "_sandboxagent/session/terminate",
        "_sandboxagent/session/list_models",
        "_sandboxagent/session/set_metadata",
        "_sandboxagent/session/ended",
        "_sandboxagent/agent/unparsed",
      ]),
    );
    assert.equal(capabilities.loadSession, true);
    assert.ok((capabilities.sessionCapabilities as Record<string, unknown>).close);
  });

  it("session/new ingests _meta; session/list injects runtime keys and returns pass-through keys", async () => {
    const passThrough = {
      variant: "fast",
      requestedSessionId: "req-1",
      permissionMode: "auto",
      skills: ["a", "b"],
      agentVersionRequested: "1.2.3",
    };
    const created = await conn.call(sse, "session/new", {
      cwd: process.cwd(),
      mcpServers: [],
      _meta: { [META]: passThrough },
    });
    const sessionId = created.result!.sessionId!;
    await conn.prompt(sse, sessionId, "echo one");
    const meta = sandboxMeta(await listEntry(conn, sse, sessionId));
    assert.deepEqual(
      { ...meta, createdAt: 0, updatedAt: 0 },
      {
        ...passThrough,
        agent: "logged",
        createdAt: 0,
        updatedAt: 0,
        ended: false,
        eventCount: updatesFor(sse, sessionId).length,
        model: "mock-fast",
        mode: "default",
      },
    );
    assert.ok((meta.eventCount as number) >= 1);
    assert.ok(Date.parse(meta.createdAt as string) <= Date.parse(meta.updatedAt as string));
  });

  it("set_metadata accepts params.metadata and params._meta, merges, and null removes a key", async () => {
    const sessionId = await conn.newSession(sse);
    const first = await conn.call(sse, "_sandboxagent/session/set_metadata", {
      sessionId,
      metadata: { variant: "a", skills: ["x"] },
    });
    // The answer shows the stored metadata as session/list does: model and mode as the agent reports them.
    const current = { model: "mock-fast", mode: "default" };
    assert.deepEqual(sandboxMeta(first.result), { variant: "a", skills: ["x"], ...current });
    const second = await conn.call(sse, "_sandboxagent/session/set_metadata", {
      sessionId,
      _meta: { [META]: { variant: "b", skills: null, permissionMode: "ask" } },
    });
    assert.deepEqual(sandboxMeta(second.result), { variant: "b", permissionMode: "ask", ...current });
    const meta = sandboxMeta(await listEntry(conn, sse, sessionId));
    assert.equal(meta.variant, "b");
    assert.equal(meta.permissionMode, "ask");
    assert.equal("skills" in meta, false);

    const fork = await conn.call(sse, "session/fork", {
      sessionId,
      cwd: process.cwd(),
      mcpServers: [],
      _meta: { [META]: { variant: "forked" } },
    });
    const forkMeta = sandboxMeta(await listEntry(conn, sse, fork.result!.sessionId!));
    assert.equal(forkMeta.variant, "forked");
    assert.equal(forkMeta.permissionMode, "ask");
  });

  it("between prompts, which nothing parses, the methods that are read still arrive whole", async () => {
    // A connection remembers the last method nothing reads (`Connection.readsParams`): the others
    // must still be parsed after it, each time.
    const sessionId = await conn.newSession(sse);
    for (let round = 0; round < 3; round++) {
      await conn.prompt(sse, sessionId, "echo ping");
      const set = await conn.call(sse, "_sandboxagent/session/set_metadata", {
        sessionId,
        metadata: { round },
      });
      assert.equal(sandboxMeta(set.result).round, round);
      await conn.prompt(sse, sessionId, "echo ping");
      const fork = await conn.call(sse, "session/fork", {
        sessionId,
        cwd: process.cwd(),
        mcpServers: [],
        _meta: { [META]: { variant: `fork ${round}` } },
      });
      assert.equal(sandboxMeta(await listEntry(conn, sse, fork.result!.sessionId!)).variant, `fork ${round}`);
    }
  });

  it("title: stored, announced as session_info_update and used as the session/list title", async () => {
    const sessionId = await conn.newSession(sse);
    const response = await conn.call(sse, "_sandboxagent/session/set_metadata", {
      sessionId,
      metadata: { title: "My task" },
    });
    assert.equal(response.error, undefined);
    const info = updatesFor(sse, sessionId).find(
      (m) => (m.params!.update as Record<string, unknown>).sessionUpdate === "session_info_update",
    );
    assert.equal((info?.params!.update as Record<string, unknown>).title, "My task");
    const entry = await listEntry(conn, sse, sessionId);
    assert.equal(entry.title, "My task");
    assert.equal(sandboxMeta(entry).title, "My task");
  });

  it("model: switches the agent's model config option; list_models and session/list follow", async () => {
    const sessionId = await conn.newSession(sse);
    const before = await conn.call(sse, "_sandboxagent/session/list_models", { sessionId });
    assert.equal(before.result!.currentModelId, "mock-fast");
    const ids = (before.result!.availableModels as Array<{ modelId: string; name: string }>).map(
      (m) => m.modelId,
    );
    assert.deepEqual(ids, ["mock-fast", "mock-smart"]);

    const set = await conn.call(sse, "_sandboxagent/session/set_metadata", {
      sessionId,
      metadata: { model: "mock-smart" },
    });
    assert.equal(set.error, undefined, JSON.stringify(set.error));
    const forwarded = receivedFor(loggedLog, "session/set_config_option", sessionId);
    assert.deepEqual(
      forwarded.map((m) => [m.params!.configId, m.params!.value]),
      [["model", "mock-smart"]],
    );
    const after = await conn.call(sse, "_sandboxagent/session/list_models", { sessionId });
    assert.equal(after.result!.currentModelId, "mock-smart");
    assert.equal(sandboxMeta(await listEntry(conn, sse, sessionId)).model, "mock-smart");
    // The agent's response to the server's own request is not shown to the client.
    assert.equal(
      sse.messages().filter((m) => typeof m.id === "string" && m.id.startsWith("_sandboxagent")).length,
      0,
    );
  });

  it("model: the agent's rejection fails set_metadata and leaves the metadata unchanged", async () => {
    const sessionId = await conn.newSession(sse);
    const response = await conn.call(sse, "_sandboxagent/session/set_metadata", {
      sessionId,
      metadata: { model: "no-such-model", variant: "v" },
    });
    assert.equal(response.error?.code, -32602);
    assert.equal(response.error?.data?.key, "model");
    const meta = sandboxMeta(await listEntry(conn, sse, sessionId));
    assert.equal(meta.variant, undefined);
    assert.equal(meta.model, "mock-fast");
  });

  it("model and mode given at session/new are applied before the answer, which shows them", async () => {
    const created = await conn.call(sse, "session/new", {
      cwd: process.cwd(),
      mcpServers: [],
      _meta: { [META]: { model: "mock-smart", mode: "plan" } },
    });
    assert.equal(created.error, undefined, JSON.stringify(created.error));
    const sessionId = created.result!.sessionId!;
    const options = created.result!.configOptions as Array<{ id: string; currentValue: string }>;
    assert.equal(options.find((o) => o.id === "model")?.currentValue, "mock-smart");
    assert.equal((created.result!.modes as { currentModeId: string }).currentModeId, "plan");
    assert.deepEqual(
      receivedFor(loggedLog, "session/set_config_option", sessionId).map((m) => m.params!.value),
      ["mock-smart"],
    );
    assert.deepEqual(
      receivedFor(loggedLog, "session/set_mode", sessionId).map((m) => m.params!.modeId),
      ["plan"],
    );
    // The switches' own notifications are folded into the answer, not sent before it.
    assert.deepEqual(updatesFor(sse, sessionId), []);
    // list_models, session/list and set_metadata agree with the agent.
    const models = await conn.call(sse, "_sandboxagent/session/list_models", { sessionId });
    assert.equal(models.result!.currentModelId, "mock-smart");
    const listed = sandboxMeta(await listEntry(conn, sse, sessionId));
    assert.equal(listed.model, "mock-smart");
    assert.equal(listed.mode, "plan");
    const set = await conn.call(sse, "_sandboxagent/session/set_metadata", {
      sessionId,
      metadata: { variant: "v" },
    });
    assert.deepEqual(sandboxMeta(set.result), { model: "mock-smart", mode: "plan", variant: "v" });
    const turn = await conn.prompt(sse, sessionId, "echo after the switch");
    assert.equal(turn.result?.stopReason, "end_turn");
  });

  it("a model the agent refuses at session/new fails the request clearly and closes the session", async () => {
    const created = await conn.call(sse, "session/new", {
      cwd: process.cwd(),
      mcpServers: [],
      _meta: { [META]: { model: "no-such-model" } },
    });
    assert.equal(created.result, undefined);
    assert.equal(created.error?.code, -32602);
    assert.match(created.error!.message, /^session\/new: The agent rejected model/);
    assert.equal(created.error?.data?.key, "model");
    const sessionId = created.error!.data!.sessionId as string;
    assert.equal(typeof sessionId, "string");
    await waitFor(
      () => receivedFor(loggedLog, "session/close", sessionId).length === 1,
      10_000,
      "session/close of the refused session",
    );
    const list = await conn.call(sse, "session/list", {});
    const ids = (list.result!.sessions as ListEntry[]).map((s) => s.sessionId);
    assert.ok(!ids.includes(sessionId), "the refused session is not listed");
  });

  it("mode: forwarded as session/set_mode", async () => {
    const sessionId = await conn.newSession(sse);
    const response = await conn.call(sse, "_sandboxagent/session/set_metadata", {
      sessionId,
      metadata: { mode: "plan" },
    });
    assert.equal(response.error, undefined, JSON.stringify(response.error));
    assert.deepEqual(
      receivedFor(loggedLog, "session/set_mode", sessionId).map((m) => m.params!.modeId),
      ["plan"],
    );
    await sse.waitFor(
      (m) =>
        m.params?.sessionId === sessionId &&
        (m.params.update as Record<string, unknown> | undefined)?.sessionUpdate === "current_mode_update",
    );
    assert.equal(sandboxMeta(await listEntry(conn, sse, sessionId)).mode, "plan");
  });

  it("detach stops the session's updates and cancels its pending permission; load re-attaches", async () => {
    const sessionId = await conn.newSession(sse);
    const promptId = await conn.send("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "permission tool-x" }],
    });
    const ask = await sse.waitFor(
      (m) => m.method === "session/request_permission" && m.params?.sessionId === sessionId,
    );
    const detached = await conn.call(sse, "_sandboxagent/session/detach", { sessionId });
    assert.deepEqual(detached.result, {});
    const turn = await sse.waitFor((m) => m.id === promptId);
    assert.equal(turn.result!.stopReason, "end_turn");
    // The server answered the permission request in the client's stead; a late client answer is swallowed.
    await conn.post({
      jsonrpc: "2.0",
      id: ask.id,
      result: { outcome: { outcome: "selected", optionId: "allow_once" } },
    });
    const answers = received(loggedLog).filter((m) => m.id === ask.id && m.method === undefined);
    assert.deepEqual(
      answers.map((m) => m.result),
      [{ outcome: { outcome: "cancelled" } }],
    );

    const seen = updatesFor(sse, sessionId).length;
    const echo = await conn.prompt(sse, sessionId, "echo while detached");
    assert.equal(echo.result!.stopReason, "end_turn");
    assert.equal(updatesFor(sse, sessionId).length, seen, "no updates while detached");

    const loaded = await conn.call(sse, "session/load", { sessionId, cwd: process.cwd(), mcpServers: [] });
    assert.equal(loaded.error, undefined);
    assert.match(agentText(sse.messages(), sessionId), /permission: cancelled/);
    assert.match(agentText(sse.messages(), sessionId), /while detached/);
    await conn.prompt(sse, sessionId, "echo back");
    assert.match(agentText(sse.messages(), sessionId), /back$/);
  });

  it("terminate cancels the turn, closes the session, emits session/ended once", async () => {
    const sessionId = await conn.newSession(sse);
    const promptId = await conn.send("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "hang" }],
    });
    await waitFor(() => receivedFor(loggedLog, "session/prompt", sessionId).length === 1);
    const terminated = await conn.call(sse, "_sandboxagent/session/terminate", { sessionId });
    assert.deepEqual(terminated.result, {});
    const ended = await sse.waitFor(
      (m) => m.method === "_sandboxagent/session/ended" && m.params?.sessionId === sessionId,
    );
    assert.deepEqual(ended.params, { sessionId, reason: "terminated", closed: true });
    assert.equal((await sse.waitFor((m) => m.id === promptId)).result!.stopReason, "cancelled");
    assert.equal(receivedFor(loggedLog, "session/cancel", sessionId).length, 1);
    assert.equal(receivedFor(loggedLog, "session/close", sessionId).length, 1);

    assert.deepEqual((await conn.call(sse, "_sandboxagent/session/terminate", { sessionId })).result, {});
    const endedEvents = sse
      .messages()
      .filter((m) => m.method === "_sandboxagent/session/ended" && m.params?.sessionId === sessionId);
    assert.equal(endedEvents.length, 1);
    assert.equal(receivedFor(loggedLog, "session/cancel", sessionId).length, 1);
  });

  it("notification forms of set_metadata, detach and terminate", async () => {
    const sessionId = await conn.newSession(sse);
    assert.equal(
      (await conn.notify("_sandboxagent/session/set_metadata", { sessionId, metadata: { variant: "n" } }))
        .status,
      202,
    );
    assert.equal(sandboxMeta(await listEntry(conn, sse, sessionId)).variant, "n");

    assert.equal((await conn.notify("_sandboxagent/session/detach", { sessionId })).status, 202);
    const seen = updatesFor(sse, sessionId).length;
    await conn.prompt(sse, sessionId, "echo hidden");
    assert.equal(updatesFor(sse, sessionId).length, seen);

    assert.equal((await conn.notify("_sandboxagent/session/terminate", { sessionId })).status, 202);
    const ended = await sse.waitFor(
      (m) => m.method === "_sandboxagent/session/ended" && m.params?.sessionId === sessionId,
    );
    assert.equal(ended.params!.reason, "terminated");
    await waitFor(() => receivedFor(loggedLog, "session/close", sessionId).length === 1);
  });

  it("unknown _sandboxagent/* methods are -32601 and never reach the agent", async () => {
    const response = await conn.call(sse, "_sandboxagent/x", {});
    assert.equal(response.error?.code, -32601);
    // No notification form: dropped (and logged), like unknown notifications.
    assert.equal((await conn.notify("_sandboxagent/session/list_models", {})).status, 202);
    assert.equal((await conn.notify("_sandboxagent/y", {})).status, 202);
    assert.equal(received(loggedLog).filter((m) => m.method?.startsWith("_sandboxagent/")).length, 0);
  });

  it("invalid params are -32602 with details; unknown sessions -32002", async () => {
    const missing = await conn.call(sse, "_sandboxagent/session/detach", {});
    assert.equal(missing.error?.code, -32602);
    assert.equal((missing.error?.data?.issues as Array<{ path: string }>)[0]!.path, "sessionId");

    const sessionId = await conn.newSession(sse);
    const neither = await conn.call(sse, "_sandboxagent/session/set_metadata", { sessionId });
    assert.equal(neither.error?.code, -32602);
    assert.match(JSON.stringify(neither.error?.data), /params.metadata/);
    const badTitle = await conn.call(sse, "_sandboxagent/session/set_metadata", {
      sessionId,
      metadata: { title: 5 },
    });
    assert.equal(badTitle.error?.code, -32602);
    assert.equal((badTitle.error?.data?.issues as Array<{ path: string }>)[0]!.path, "metadata.title");

    const unknown = await conn.call(sse, "_sandboxagent/session/list_models", { sessionId: "nope" });
    assert.equal(unknown.error?.code, -32002);
  });

  it("everything else is forwarded verbatim: a _vendor/x request gets the agent's -32601", async () => {
    const response = await conn.call(sse, "_vendor/x", { a: 1 });
    assert.equal(response.error?.code, -32601);
    assert.ok(received(loggedLog).some((m) => m.method === "_vendor/x" && m.id === response.id));
  });

  it("agent/unparsed for non-JSON agent output; session/ended on crash, not for terminated sessions", async () => {
    const own = await RawConnection.open(server, "logged");
    const events = await own.openSse();
    try {
      const sessionId = await own.newSession(events);
      await own.prompt(events, sessionId, "garbage not json at all");
      const unparsed = await events.waitFor((m) => m.method === "_sandboxagent/agent/unparsed");
      assert.equal(unparsed.params!.line, "not json at all");
      // A text chunk with a well-formed start and a broken end must not pass the JSON.parse-free
      // fast path for such chunks (runtime/content-chunk.ts).
      const broken = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"${sessionId}","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"cut"}}}`;
      await own.prompt(events, sessionId, `garbage ${broken}`);
      const second = await events.waitFor(
        (m) => m.method === "_sandboxagent/agent/unparsed" && m.params!.line === broken,
      );
      assert.equal(second.params!.truncated, false);

      const other = await own.newSession(events);
      await own.call(events, "_sandboxagent/session/terminate", { sessionId: other });
      await own.send("session/prompt", { sessionId, prompt: [{ type: "text", text: "crash 3" }] });
      const ended = await events.waitFor(
        (m) => m.method === "_sandboxagent/session/ended" && m.params?.reason === "agent_exited",
      );
      assert.equal(ended.params!.sessionId, sessionId);
      assert.equal(ended.params!.exitCode, 3);
      const endings = events.messages().filter((m) => m.method === "_sandboxagent/session/ended");
      assert.deepEqual(
        endings.map((m) => [m.params!.sessionId, m.params!.reason]),
        [
          [other, "terminated"],
          [sessionId, "agent_exited"],
        ],
      );
    } finally {
      events.close();
      await own.delete();
    }
  });

  it("closing a connection with DELETE marks its sessions ended for other connections", async () => {
    const first = await RawConnection.open(server, "persisted");
    const events = await first.openSse();
    const sessionId = await first.newSession(events);
    events.close();
    await first.delete();
    const second = await RawConnection.open(server, "persisted");
    const stream = await second.openSse();
    try {
      assert.equal(sandboxMeta(await listEntry(second, stream, sessionId)).ended, true);
    } finally {
      stream.close();
      await second.delete();
    }
  });

  it("metadata and ended outlive the connection: another connection's session/list shows them", async () => {
    const first = await RawConnection.open(server, "persisted");
    const events = await first.openSse();
    const sessionId = await first.newSession(events);
    await first.call(events, "_sandboxagent/session/set_metadata", {
      sessionId,
      metadata: { variant: "kept" },
    });
    await first.call(events, "_sandboxagent/session/terminate", { sessionId });
    events.close();
    await first.delete();

    const second = await RawConnection.open(server, "persisted");
    const stream = await second.openSse();
    try {
      const meta = sandboxMeta(await listEntry(second, stream, sessionId));
      assert.equal(meta.variant, "kept");
      assert.equal(meta.ended, true);
      assert.equal(meta.agent, "persisted");
      const resumed = await second.call(stream, "session/resume", {
        sessionId,
        cwd: process.cwd(),
        mcpServers: [],
      });
      assert.equal(resumed.error, undefined);
      assert.equal(sandboxMeta(await listEntry(second, stream, sessionId)).ended, false);
    } finally {
      stream.close();
      await second.delete();
    }
  });

  it("without agent support the server answers session/list and terminate skips session/close", async () => {
    const own = await RawConnection.open(server, "nolist");
    const events = await own.openSse();
    try {
      const capabilities = own.initialize.result!.agentCapabilities as Record<
        string,
        Record<string, unknown>
      >;
      assert.deepEqual(capabilities.sessionCapabilities!.list, {});
      const first = await own.newSession(events);
      const second = await own.newSession(events);
      await own.call(events, "_sandboxagent/session/set_metadata", {
        sessionId: first,
        metadata: { title: "First" },
      });
      await own.call(events, "_sandboxagent/session/terminate", { sessionId: second });
      const ended = await events.waitFor((m) => m.method === "_sandboxagent/session/ended");
      assert.deepEqual(ended.params, { sessionId: second, reason: "terminated", closed: false });
      assert.equal(receivedFor(noListLog, "session/close", second).length, 0);
      await waitFor(() => receivedFor(noListLog, "session/cancel", second).length === 1);

      const list = await own.call(events, "session/list", {});
      assert.equal(received(noListLog).filter((m) => m.method === "session/list").length, 0);
      const sessions = list.result!.sessions as ListEntry[];
      assert.deepEqual(new Set(sessions.map((s) => s.sessionId)), new Set([first, second]));
      const byId = new Map(sessions.map((s) => [s.sessionId, s]));
      assert.equal(byId.get(first)!.title, "First");
      assert.equal(byId.get(first)!.cwd, process.cwd());
      assert.equal(sandboxMeta(byId.get(first)).agent, "nolist");
      assert.equal(sandboxMeta(byId.get(second)).ended, true);
      const filtered = await own.call(events, "session/list", { cwd: "/elsewhere" });
      assert.deepEqual(filtered.result!.sessions, []);
    } finally {
      events.close();
      await own.delete();
    }
  });
});

describe("Sandbox extension methods in flight when the connection ends", () => {
  it("a set_metadata waiting for the agent's mode switch when the agent dies: answered once, by its handler", async () => {
    const server = await startServer({ config: { agents: { mock: mockWith() } } });
    try {
      const conn = await RawConnection.open(server);
      const sse = await conn.openSse(null);
      const sessionId = await conn.newSession(sse);
      const listed = await fetch(`${server.baseUrl}/v2/connections/${conn.id}`, {
        headers: server.headers(),
      });
      const { pid } = (await listed.json()) as { pid: number };
      // Stopped, the agent never answers the switch: the server's own method stays in flight.
      process.kill(pid, "SIGSTOP");
      const id = await conn.send("_sandboxagent/session/set_metadata", {
        sessionId,
        metadata: { mode: "plan" },
      });
      process.kill(pid, "SIGKILL");
      await sse.done;
      const answers = sse.messages().filter((m) => m.id === id && m.method === undefined);
      assert.equal(answers.length, 1, JSON.stringify(answers));
      // The connection's end answers it (the agent exited); its handler's later answer is not sent too.
      assert.match(answers[0]!.error!.message, /agent process exited/);
      assert.equal((answers[0]!.error!.data as { reason?: string }).reason, "agent_exited");
      assert.ok(sse.messages().some((m) => m.method === "_sandboxagent/session/ended"));
    } finally {
      await server.stop();
    }
  });
});
