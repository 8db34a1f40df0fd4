import assert from "node:assert/strict";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { startServer, tempDir, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { ProcessApi, type ProcessInfo } from "./support/processes.js";
import { agentText, RawConnection, type RpcMessage } from "./support/rpc.js";

const SERVE = { _meta: { "sandboxagent.dev": { agent: "mock", serveClientCapabilities: true } } };

/** Agent requests that reached the client over the SSE stream. */
function clientRequests(messages: RpcMessage[]): string[] {
  return messages.filter((m) => m.method && m.id !== undefined && m.id !== null).map((m) => m.method!);
}

describe("ACP client capabilities served inside the sandbox (opt-in)", { timeout: 60_000 }, () => {
  let server: RunningServer;
  let root: string;
  let outside: string;
  before(async () => {
    root = tempDir("served-fs-root-");
    outside = tempDir("served-fs-outside-");
    writeFileSync(path.join(outside, "secret.txt"), "do not read");
    symlinkSync(outside, path.join(root, "escape"));
    server = await startServer({ token: "served-token", args: ["--workdir", root] });
  });
  after(() => server.stop());

  it("advertises fs and terminal to the agent and answers them itself; the client sees the tool calls", async () => {
    const conn = await RawConnection.open(server, "mock", SERVE);
    const served = (conn.initialize.result!.agentCapabilities as Record<string, Record<string, unknown>>)
      ._meta!;
    assert.deepEqual(served["sandboxagent.dev"], {
      ...(served["sandboxagent.dev"] as object),
      servedClientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true },
    });
    const sse = await conn.openSse();
    const sessionId = await conn.newSession(sse, root);
    const answer = await conn.prompt(
      sse,
      sessionId,
      "fs-write notes/a.txt hello there\nread notes/a.txt\nterminal echo from-$((40+2)) >&2; echo out; exit 3\nterminal-kill sleep 4711.71",
    );
    assert.equal(answer.result?.stopReason, "end_turn");
    assert.deepEqual(agentText(sse.messages(), sessionId).split(/(?=fs-wrote|read notes|terminal )/), [
      "fs-wrote notes/a.txt",
      "read notes/a.txt: hello there",
      "terminal exit 3: from-42\nout\n",
      "terminal killed SIGKILL: ",
    ]);
    assert.equal(readFileSync(path.join(root, "notes/a.txt"), "utf8"), "hello there");
    assert.deepEqual(clientRequests(sse.messages()), [], "no fs/* or terminal/* request reached the client");
    const toolCalls = sse
      .messages()
      .filter((m) => (m.params?.update as { sessionUpdate?: string })?.sessionUpdate === "tool_call");
    assert.equal(toolCalls.length, 2, "the client sees every tool call");
    const released = await new ProcessApi(server).call<{ processes: ProcessInfo[] }>("GET", "/v2/processes");
    assert.deepEqual(
      released.body.processes.filter((p) => p.source === "acp"),
      [],
      "released terminals are gone",
    );
    sse.close();
    await conn.delete();
  });

  it("confines files to the filesystem root, symlinks included", async () => {
    const conn = await RawConnection.open(server, "mock", SERVE);
    const sse = await conn.openSse();
    const sessionId = await conn.newSession(sse, root);
    await conn.prompt(
      sse,
      sessionId,
      `read ${outside}/secret.txt\nread escape/secret.txt\nfs-write escape/new.txt x`,
    );
    const lines = agentText(sse.messages(), sessionId).split(/(?=read |fs-write )/);
    assert.equal(lines.length, 3, JSON.stringify(lines));
    for (const line of lines) assert.match(line, /failed: -32603 .*outside the filesystem root/);
    sse.close();
    await conn.delete();
  });

  it("shows an agent's terminal as a process of /v2/processes while it runs", async () => {
    const api = new ProcessApi(server);
    const conn = await RawConnection.open(server, "mock", SERVE);
    const sse = await conn.openSse();
    const sessionId = await conn.newSession(sse, root);
    const turn = conn.prompt(sse, sessionId, "terminal echo started; sleep 1; echo finished");
    const listed = (await waitFor(
      async () =>
        (await api.call<{ processes: ProcessInfo[] }>("GET", "/v2/processes")).body.processes.find(
          (p) => p.source === "acp",
        ),
      5000,
      "the agent's terminal",
    )) as ProcessInfo;
    const toolCall = await sse.waitFor(
      (m) => (m.params?.update as { sessionUpdate?: string })?.sessionUpdate === "tool_call",
    );
    const content = (toolCall.params!.update as { content: Array<{ terminalId: string }> }).content;
    assert.equal(content[0]!.terminalId, listed.id, "the terminal id is the process id");
    const follower = await api.follow(listed.id);
    await turn;
    await follower.done;
    assert.equal(follower.text(), "started\nfinished\n");
    sse.close();
    await conn.delete();
  });

  it("leaves fs and terminal to the client without the option", async () => {
    const conn = await RawConnection.open(server, "mock");
    const sse = await conn.openSse();
    const sessionId = await conn.newSession(sse, root);
    mkdirSync(path.join(root, "plain"), { recursive: true });
    await conn.prompt(sse, sessionId, "read plain/x.txt; terminal echo hi");
    assert.equal(agentText(sse.messages(), sessionId), "fs not supportedterminal not supported");
    sse.close();
    await conn.delete();
  });
});
