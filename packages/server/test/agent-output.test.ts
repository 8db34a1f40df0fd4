import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { startServer, tempDir, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { filteredMock, mockWith, stdinLog } from "./support/agents.js";
import { processesWith } from "./support/procs.js";
import { agentText, RawConnection, type RpcMessage } from "./support/rpc.js";
import { openWs } from "./support/ws-rpc.js";

const muteLog = stdinLog();
/** A session id of text chunks the connection never created (regexp characters in it on purpose). */
const OTHER_SESSION = "other.session*(1)";

/** The bytes of an SSE response body read over a raw HTTP/1.1 socket, until `until` matches them. */
function rawSse(server: RunningServer, connectionId: string, cursor: string, until: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(server.port, "127.0.0.1", () =>
      socket.write(
        "GET /v2/rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n" +
          `Acp-Connection-Id: ${connectionId}\r\nLast-Event-ID: ${cursor}\r\n\r\n`,
      ),
    );
    let raw = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`timed out; got ${JSON.stringify(raw.slice(-2000))}`));
    }, 15_000);
    socket.setEncoding("latin1"); // one char per byte: chunk sizes count chars
    socket.on("data", (chunk: string) => {
      raw += chunk;
      const body = dechunk(raw.slice(raw.indexOf("\r\n\r\n") + 4));
      if (until.test(body)) {
        clearTimeout(timer);
        socket.destroy();
        resolve(body);
      }
    });
    socket.on("error", reject);
  });
}

/** The data of a chunked transfer-encoded body, as far as it arrived. */
function dechunk(body: string): string {
  let data = "";
  for (let at = 0; ;) {
    const eol = body.indexOf("\r\n", at);
    if (eol === -1) return data;
    const size = parseInt(body.slice(at, eol), 16);
    data += body.slice(eol + 2, eol + 2 + size);
    at = eol + 2 + size + 2;
    if (!(size > 0) || at > body.length) return data;
  }
}

describe("agent output: SSE framing, stdout EOF", () => {
  let server: RunningServer;

  before(async () => {
    server = await startServer({
      config: {
        agents: {
          // Every JSON line as `{\r"jsonrpc"…`: valid JSON, but a bare CR ends an SSE line.
          cr: mockWith("--cr-in-json"),
          // Text chunks with characters of every UTF-8 length, CRLF line ends, and one line that
          // is not in the canonical form (a space after a colon), so it is parsed instead.
          bytes: filteredMock(
            `(line) => line.includes('"agent_message_chunk"') ? line + "\\r\\n" + line.replace('"jsonrpc":', '"jsonrpc": ') + "\\r" : line`,
          ),
          mute: mockWith("--ignore-stdin-eof", "--stdin-log", muteLog),
          // Every text chunk followed by a copy for another session (not one of the connection's),
          // the copy with CRLF and an empty line before it: sessions that alternate line by line.
          alternate: filteredMock(
            `(line) => line.includes('"agent_message_chunk"') ? line + "\\n\\n" + line.replace(/"sessionId":"[^"]*"/, '"sessionId":"${OTHER_SESSION}"') + "\\r" : line`,
          ),
        },
        limits: { killGraceMs: 300 },
      },
    });
  });
  after(() => server.stop());

  it("a bare CR inside an agent's JSON line never reaches the stream: every answer arrives", async () => {
    // initialize, session/new and the prompt's answer all carry a CR: before, each was cut in two and lost.
    const conn = await RawConnection.open(server, "cr");
    const sse = await conn.openSse();
    const sessionId = await conn.newSession(sse);
    const done = await conn.prompt(sse, sessionId, "echo line\u2028sep\u2029para\rcr");
    assert.equal(done.result?.stopReason, "end_turn");
    assert.match(agentText(sse.messages(), sessionId), /line\u2028sep\u2029para\rcr/);
    // A raw line with CRs that is JSON but not JSON-RPC is forwarded too, without them.
    const garbage = await conn.prompt(sse, sessionId, 'garbage {"a":\r1,\r"b"\r:2}');
    assert.equal(garbage.result?.stopReason, "end_turn");
    assert.ok(sse.messages().some((m) => (m as { a?: number }).a === 1));
    // On the wire: not one CR in the event stream, so no event can be cut short.
    const firstId = sse.events.find((e) => e.id !== undefined)!.id!;
    const events = await rawSse(server, conn.id, firstId, /("stopReason":"end_turn"[\s\S]*){2}/);
    assert.equal(events.includes("\r"), false, JSON.stringify(events.slice(0, 500)));
    sse.close();
    await conn.delete();
  });

  it("an agent's text chunks reach the stream as its own bytes: multi-byte characters, CRLF, non-canonical lines", async () => {
    const conn = await RawConnection.open(server, "bytes");
    const sse = await conn.openSse();
    const sessionId = await conn.newSession(sse);
    const text = 'ascii é ß ✓ € 😀 𝄞 \\ " \u2028 end';
    const done = await conn.prompt(sse, sessionId, `echo ${text}`);
    assert.equal(done.result?.stopReason, "end_turn");
    // Each chunk twice: the canonical line (recognised on its bytes) and the spaced one (parsed).
    assert.equal(agentText(sse.messages(), sessionId), text + text);
    const firstId = sse.events.find((e) => e.id !== undefined)!.id!;
    const body = await rawSse(server, conn.id, firstId, /"stopReason":"end_turn"/);
    // The body's characters are its bytes (latin1): the canonical line went through unchanged.
    const utf8 = Buffer.from(body, "latin1").toString("utf8");
    const canonical = JSON.stringify({
      jsonrpc: "2.0",
      method: "session/update",
      params: {
        sessionId,
        update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
      },
    });
    assert.ok(utf8.includes(`data: ${canonical}\n`), utf8.slice(0, 1000));
    assert.ok(utf8.includes(`data: ${canonical.replace('"jsonrpc":', '"jsonrpc": ')}\n`));
    assert.equal(body.includes("\r"), false);
    sse.close();
    await conn.delete();
  });

  it("text chunks of sessions that alternate line by line: each reaches the stream in order and counts for its own session", async () => {
    // 3,000 chunks: past the chunk at which a session gets a pattern of its own (content-chunk.ts),
    // which must then not take the other session's lines.
    const conn = await RawConnection.open(server, "alternate");
    const sse = await conn.openSse();
    const sessionId = await conn.newSession(sse);
    const done = await conn.prompt(sse, sessionId, "chunks 3000", 60_000);
    assert.equal(done.result?.stopReason, "end_turn");
    const chunks = sse
      .messages()
      .filter((m) => m.method === "session/update")
      .map((m) => {
        const params = m.params as {
          sessionId: string;
          update: { sessionUpdate: string; content?: { text?: string } };
        };
        return [params.sessionId, params.update.sessionUpdate, params.update.content?.text];
      })
      .filter(([, kind]) => kind === "agent_message_chunk");
    const expected = Array.from({ length: 3000 }, (_, i) => [
      [sessionId, "agent_message_chunk", `chunk ${i + 1} `],
      [OTHER_SESSION, "agent_message_chunk", `chunk ${i + 1} `],
    ]).flat();
    assert.deepEqual(chunks, expected);
    const own = sse
      .messages()
      .filter(
        (m) => m.method === "session/update" && (m.params as { sessionId: string }).sessionId === sessionId,
      );
    const res = await fetch(`${server.baseUrl}/v2/connections/${conn.id}`, { headers: server.headers() });
    const snapshot = (await res.json()) as { sessions: Array<{ sessionId: string; eventCount: number }> };
    assert.deepEqual(
      snapshot.sessions.map((s) => [s.sessionId, s.eventCount]),
      [[sessionId, own.length]],
    );
    sse.close();
    await conn.delete();
  });

  it("an agent that closes stdout and stays alive: pending requests fail, the agent is stopped, the id answers 410", async () => {
    const conn = await RawConnection.open(server, "mute");
    const sse = await conn.openSse();
    const sessionId = await conn.newSession(sse);
    const [pid] = processesWith(muteLog);
    assert.ok(pid, "agent running");
    const promptId = await conn.send("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "echo last words\nclose-stdout" }],
    });
    const error = await sse.waitFor((m) => m.id === promptId);
    assert.equal(error.error?.code, -32603);
    assert.equal(error.error?.data?.reason, "agent_stdout_closed");
    const ended = await sse.waitFor((m) => m.method === "_sandboxagent/session/ended");
    assert.equal(ended.params?.sessionId, sessionId);
    assert.equal(ended.params?.reason, "agent_stdout_closed");
    await sse.done;
    assert.match(agentText(sse.messages(), sessionId), /last words/);
    // It ignores stdin EOF, so only the server's SIGTERM ends it.
    await waitFor(() => processesWith(muteLog).length === 0, 5000, "the mute agent to be stopped");
    const later = await conn.post({ jsonrpc: "2.0", id: 5, method: "session/prompt", params: {} });
    assert.equal(later.status, 410);
    assert.equal(((await later.json()) as { reason: string }).reason, "agent_stdout_closed");
  });
});

/**
 * The mock behind a filter that writes each stdout line to `log` as well: answers to requests whose
 * id starts `spaced-`, `reordered-` or `cr-` in forms the SDKs do not write (a space after
 * `"result":`, `id` last, a CR after `"result":`), every other line as the mock wrote it.
 */
function loggedAnswers(log: string) {
  return filteredMock(`(line) => {
    const answer = line.includes('"result":');
    const out = answer && line.includes('"id":"spaced-') ? line.replace('"result":', '"result": ')
      : answer && line.includes('"id":"reordered-') ? JSON.stringify((({ jsonrpc, id, result }) => ({ jsonrpc, result, id }))(JSON.parse(line)))
      : answer && line.includes('"id":"cr-') ? line.replace('"result":', '"result":\\r')
      : line;
    process.getBuiltinModule("node:fs").appendFileSync(${JSON.stringify(log)}, out + "\\n");
    return out;
  }`);
}

describe("agent output: answers to client requests", () => {
  const log = path.join(tempDir("agent-lines-"), "stdout.log");
  const wsLog = path.join(tempDir("agent-lines-"), "stdout.log");
  let server: RunningServer;

  before(async () => {
    server = await startServer({
      config: { agents: { answers: loggedAnswers(log), wsAnswers: loggedAnswers(wsLog) } },
    });
  });
  after(() => server.stop());

  it("reach the stream and the log as the agent wrote them, whatever their id or form, in order with text chunks", async () => {
    // Canonical answers to requests in flight (numeric and plain string ids) skip JSON.parse
    // (`agent-answer.ts`); the rest are parsed as before: ids with escapes or not ASCII, a 16-digit
    // id, other forms, an error, answers to no request in flight (the `garbage` lines), and answers
    // an extension reads (session/new) or rewrites (session/list). Each must come out as it did
    // before the scan: the agent's line without its CRs, or the extension's rewrite.
    const conn = await RawConnection.open(server, "answers");
    const sse = await conn.openSse();
    const sessionId = await conn.newSession(sse);
    const stray = (id: string) => `garbage {"jsonrpc":"2.0","id":${id},"result":{"stopReason":"end_turn"}}`;
    const requests: Array<[number | string, string]> = [
      [41, "echo numeric"],
      [-7, "echo negative"],
      [0, "echo zero"],
      [1234567890123456, "echo sixteen digits"],
      ["plain-1", "chunks 20"],
      ['q"uote\\slash/\n', "echo escaped"],
      ["é-1", "echo not ascii ✓"],
      ["spaced-1", "echo spaced"],
      ["reordered-1", "echo reordered"],
      ["cr-1", "echo carriage return"],
      ["err-1", "error 4321 boom"],
      ["stray-1", `chunks 3\n${stray('"stray-0"')}\n${stray("424242")}\nchunks 3`],
      // Answered requests are out of flight: their ids are taken again (a 400 otherwise).
      [41, "echo again"],
      ["plain-1", "echo again"],
    ];
    for (const [id, text] of requests) {
      const answers = (m: RpcMessage) => m.id === id && m.method === undefined;
      const earlier = sse.messages().filter(answers).length;
      const params = { sessionId, prompt: [{ type: "text", text }] };
      const accepted = await conn.post({ jsonrpc: "2.0", id, method: "session/prompt", params });
      assert.equal(accepted.status, 202, await accepted.text());
      let seen = 0;
      const answer = await sse.waitFor((m) => answers(m) && ++seen > earlier);
      assert.equal(
        id === "err-1" ? answer.error?.code : answer.result?.stopReason,
        id === "err-1" ? 4321 : "end_turn",
      );
    }
    const list = await conn.call(sse, "session/list", {});
    const firstId = sse.events.find((e) => e.id !== undefined)!.id!;
    const body = await rawSse(server, conn.id, firstId, /"sessions":/);
    sse.close();
    const events = body
      .split("\n")
      .filter((line) => line.startsWith("data: ") && line !== "data: ") // the priming event has no data
      .map((line) => Buffer.from(line.slice(6), "latin1"));
    // The agent's lines after initialize's answer (which the POST returned), as bytes, CRs taken out.
    const written = readFileSync(log, "utf8")
      .split("\n")
      .filter((line) => line !== "")
      .slice(1)
      .map((line) => Buffer.from(line.replaceAll("\r", "")));
    assert.equal(events.length, written.length);
    for (let i = 0; i < events.length - 1; i++)
      assert.equal(events[i]!.toString(), written[i]!.toString(), `event ${i}`);
    // Byte for byte, the multi-byte characters included.
    assert.deepEqual(events.slice(0, -1), written.slice(0, -1));
    // session/list's answer is the one the extension rewrote (it merges the server's own sessions).
    assert.notDeepEqual(events.at(-1), written.at(-1));
    assert.equal(events.at(-1)!.toString(), JSON.stringify(list));
    await conn.delete();
  });

  it("reach a WebSocket as the agent wrote them", async () => {
    const ws = await openWs(server.baseUrl, { headers: server.headers() });
    const frames: Buffer[] = [];
    ws.ws.on("message", (data: Buffer) => frames.push(data));
    const agent = { _meta: { "sandboxagent.dev": { agent: "wsAnswers" } } };
    ws.send({
      id: 0,
      method: "initialize",
      params: { protocolVersion: 1, clientCapabilities: {}, ...agent },
    });
    await ws.waitFor((m) => m.id === 0);
    ws.send({ id: 1, method: "session/new", params: { cwd: process.cwd(), mcpServers: [] } });
    const sessionId = (await ws.waitFor((m) => m.id === 1)).result!.sessionId!;
    for (const [id, text] of [
      [2, "chunks 5"],
      ["ws-1", "echo string id ✓"],
      ['ws"2', "echo escaped id"],
      ["err-1", "error 4321 boom"],
    ] as const) {
      ws.send({ id, method: "session/prompt", params: { sessionId, prompt: [{ type: "text", text }] } });
      await ws.waitFor((m) => m.id === id && m.method === undefined);
    }
    // Every frame after initialize's answer (which an extension rewrites) is one of the agent's lines.
    const written = readFileSync(wsLog, "utf8")
      .split("\n")
      .filter((line) => line !== "")
      .slice(1)
      .map((line) => Buffer.from(line));
    assert.deepEqual(frames.slice(1), written);
    ws.ws.close();
    await ws.closed;
  });
});
