import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { startServer, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { scanEnvelope } from "../src/transport/envelope.js";
import { parseMessage } from "../src/transport/parse-message.js";
import { mockWith, stdinLog } from "./support/agents.js";
import { agentText, RawConnection, type RpcMessage } from "./support/rpc.js";
import { openWs, type WsRpc } from "./support/ws-rpc.js";

// The request path reads most bodies without `JSON.parse` (transport/envelope.ts): these are the
// bodies at its edges. Every row's answer is what the server gave before that scan existed (each
// detail was read from that build), so a body the scan gets wrong shows up as a changed answer.

/** A request for a method no extension reads, so that it takes the scan's path when it is valid. */
const probe = (id: string, params = "{}") =>
  `{"jsonrpc":"2.0","id":${id},"method":"probe/bad","params":${params}}`;

interface Refused {
  name: string;
  body: string | Buffer;
  code: -32700 | -32600;
  /** The problem's detail; for -32700, its start (the rest is V8's own message). */
  detail: string;
}

const NOT_JSON = "The body is not valid JSON: ";
const INVALID = "The message is neither a request, a notification nor a response.";
const JSONRPC = 'The message must have "jsonrpc": "2.0".';
const numericId = (source: string) =>
  `The numeric id ${source} is not an integer between -(2^53-1) and 2^53-1 written without fraction or exponent; use such an integer or a string.`;

const REFUSED: Refused[] = [
  { name: "malformed JSON", body: probe("1", '{"a":}'), code: -32700, detail: NOT_JSON },
  { name: "an unterminated object", body: probe("1").slice(0, -1), code: -32700, detail: NOT_JSON },
  { name: "an empty body", body: "", code: -32700, detail: NOT_JSON },
  { name: "whitespace only", body: " \r\n\t", code: -32700, detail: NOT_JSON },
  { name: "a scalar", body: "42", code: -32600, detail: "The body must be a JSON-RPC message object." },
  { name: "null", body: "null", code: -32600, detail: "The body must be a JSON-RPC message object." },
  {
    name: "a batch",
    body: `[${probe("1")}]`,
    code: -32600,
    detail: "JSON-RPC batches are not supported: send one message per POST.",
  },
  {
    name: "an empty batch",
    body: "[]",
    code: -32600,
    detail: "JSON-RPC batches are not supported: send one message per POST.",
  },
  { name: "jsonrpc 1.0", body: probe("1").replace('"2.0"', '"1.0"'), code: -32600, detail: JSONRPC },
  { name: "jsonrpc a number", body: probe("1").replace('"2.0"', "2.0"), code: -32600, detail: JSONRPC },
  {
    name: "jsonrpc missing",
    body: probe("1").replace('"jsonrpc":"2.0",', ""),
    code: -32600,
    detail: JSONRPC,
  },
  {
    name: "jsonrpc twice, the last wrong",
    body: probe("1").replace('"2.0"', '"2.0","jsonrpc":"2"'),
    code: -32600,
    detail: JSONRPC,
  },
  {
    name: "an escaped jsonrpc value",
    body: probe("1").replace('"2.0"', '"2\\u002e1"'),
    code: -32600,
    detail: JSONRPC,
  },
  {
    name: "id true",
    body: probe("true"),
    code: -32600,
    detail: "The id must be a string, an integer or null.",
  },
  {
    name: "id an object",
    body: probe("{}"),
    code: -32600,
    detail: "The id must be a string, an integer or null.",
  },
  {
    name: "id an array",
    body: probe("[1]"),
    code: -32600,
    detail: "The id must be a string, an integer or null.",
  },
  { name: "id 1.5", body: probe("1.5"), code: -32600, detail: numericId("1.5") },
  { name: "id 1.0", body: probe("1.0"), code: -32600, detail: numericId("1.0") },
  { name: "id 1e3", body: probe("1e3"), code: -32600, detail: numericId("1e3") },
  { name: "id 2^53", body: probe("9007199254740992"), code: -32600, detail: numericId("9007199254740992") },
  {
    name: "id -2^53",
    body: probe("-9007199254740992"),
    code: -32600,
    detail: numericId("-9007199254740992"),
  },
  { name: "id 1e400", body: probe("1e400"), code: -32600, detail: numericId("1e400") },
  {
    name: "id of 30 digits",
    body: probe("123456789012345678901234567890"),
    code: -32600,
    detail: numericId("123456789012345678901234567890"),
  },
  { name: "id 01", body: probe("01"), code: -32700, detail: NOT_JSON },
  {
    name: "a string id of 1,025 characters",
    body: probe(`"${"i".repeat(1025)}"`),
    code: -32600,
    detail: "The id is 1025 characters long; at most 1024 are accepted.",
  },
  {
    name: "a string id of 1,025 characters, one escaped",
    body: probe(`"\\u0069${"i".repeat(1024)}"`),
    code: -32600,
    detail: "The id is 1025 characters long; at most 1024 are accepted.",
  },
  {
    name: "id twice, the last 1.5",
    body: probe("7").replace('"method"', '"id":1.5,"method"'),
    code: -32600,
    detail: numericId("1.5"),
  },
  { name: "no method", body: '{"jsonrpc":"2.0","id":1,"params":{}}', code: -32600, detail: INVALID },
  {
    name: "method a number",
    body: '{"jsonrpc":"2.0","id":1,"method":5,"params":{}}',
    code: -32600,
    detail: INVALID,
  },
  { name: "method null", body: '{"jsonrpc":"2.0","id":1,"method":null}', code: -32600, detail: INVALID },
  { name: "trailing garbage", body: `${probe("1")}x`, code: -32700, detail: NOT_JSON },
  { name: "two messages", body: probe("1") + probe("2"), code: -32700, detail: NOT_JSON },
  { name: "a trailing comma", body: `${probe("1")},`, code: -32700, detail: NOT_JSON },
  { name: "a comma before the brace", body: probe("1", '{"a":1,}'), code: -32700, detail: NOT_JSON },
  {
    name: "a raw control character in a string",
    body: probe("1", '{"a":"x\u0001y"}'),
    code: -32700,
    detail: NOT_JSON,
  },
  { name: "a raw tab in a string", body: probe("1", '{"a":"x\ty"}'), code: -32700, detail: NOT_JSON },
  { name: "an unknown escape", body: probe("1", '{"a":"\\x41"}'), code: -32700, detail: NOT_JSON },
  { name: "a short \\u escape", body: probe("1", '{"a":"\\u12"}'), code: -32700, detail: NOT_JSON },
  { name: "a number with a bare dot", body: probe("1", '{"a":1.}'), code: -32700, detail: NOT_JSON },
  { name: "a number with a leading plus", body: probe("1", '{"a":+1}'), code: -32700, detail: NOT_JSON },
  { name: "a misspelt literal", body: probe("1", '{"a":nul}'), code: -32700, detail: NOT_JSON },
  { name: "a single-quoted string", body: probe("1", "{'a':1}"), code: -32700, detail: NOT_JSON },
  {
    name: "nesting 129 levels deep",
    body: probe("1", `{"a":${"[".repeat(127)}${"]".repeat(127)}}`),
    code: -32600,
    detail: "The message is nested 129 levels deep; at most 128 are accepted.",
  },
  {
    name: "a byte that is no UTF-8 after the object",
    body: Buffer.concat([Buffer.from(probe("1")), Buffer.from([0xff])]),
    code: -32700,
    detail: NOT_JSON,
  },
  { name: "a NUL after the object", body: `${probe("1")}\u0000`, code: -32700, detail: NOT_JSON },
];

/** Odd but valid: each reaches the agent (`method` "probe/ok", the row's id) and is answered. */
interface Accepted {
  name: string;
  body: string | Buffer;
  /** What the agent must receive, byte for byte (the row's body trimmed, when not given). */
  line?: string;
}

const ok = (id: string, params = "{}") =>
  `{"jsonrpc":"2.0","id":${id},"method":"probe/ok","params":${params}}`;

const ACCEPTED: Accepted[] = [
  { name: "plain", body: ok("201") },
  { name: "surrounding whitespace and a final newline", body: ` \t${ok("202")}\r\n` },
  { name: "a byte-order mark", body: `\ufeff${ok("203")}`, line: ok("203") },
  {
    name: "a byte that is no UTF-8 inside a string",
    body: Buffer.concat([
      Buffer.from(ok("204", '{"a":"x').slice(0, -1)),
      Buffer.from([0xff]),
      Buffer.from('"}}'),
    ]),
    line: ok("204", '{"a":"x\ufffd"}'),
  },
  { name: "id twice, the last valid", body: ok('"first"').replace('"method"', '"id":205,"method"') },
  { name: "params an array", body: ok("206", "[1,2]") },
  { name: "params a string", body: ok("207", '"p"') },
  { name: "no params", body: '{"jsonrpc":"2.0","id":208,"method":"probe/ok"}' },
  { name: "an escaped key", body: ok("209").replace('"jsonrpc"', '"\\u006asonrpc"') },
  { name: "an escaped method", body: ok("210").replace("probe/ok", "probe\\/ok") },
  {
    name: "a huge number in params",
    body: ok("211", '{"n":1e400,"m":-0.5E-7,"k":123456789012345678901234567890}'),
  },
  { name: "a string id of 1,024 characters", body: ok(`"${"i".repeat(1024)}"`) },
  { name: "a string id with escapes and unicode", body: ok('"id \\"é\\" \\u2603 ✓"') },
  {
    name: "an extra member",
    body: ok("212").replace('"params"', '"extra":{"x":[true,false,null]},"params"'),
  },
  { name: "id -0", body: ok("-0") },
  { name: "id -(2^53-1)", body: ok("-9007199254740991") },
  {
    name: "nested 128 levels deep",
    body: ok("213", `{"a":${"[".repeat(126)}${"]".repeat(126)}}`),
  },
  {
    name: "a pretty-printed body",
    body: JSON.stringify({ jsonrpc: "2.0", id: 214, method: "probe/ok", params: { a: [1, "b"] } }, null, 2),
    line: JSON.stringify({ jsonrpc: "2.0", id: 214, method: "probe/ok", params: { a: [1, "b"] } }),
  },
  {
    name: "raw newlines between members",
    body: ok("215").replaceAll(",", ",\r\n"),
    line: ok("215"),
  },
];

/** The id of a row, as the agent and the answer carry it (JSON.parse keeps the last of duplicates). */
function idOf(row: Accepted): string | number {
  const text = typeof row.body === "string" ? row.body : row.body.toString("utf8");
  return (JSON.parse(text.trim()) as { id: string | number }).id;
}

describe("request bodies: the envelope scan answers as the full parse did", { timeout: 60_000 }, () => {
  const stdin = stdinLog();
  let server: RunningServer;
  let conn: RawConnection;
  const lines = () => readFileSync(stdin, "utf8").split("\n");

  before(async () => {
    server = await startServer({
      config: { agents: { logged: mockWith("--stdin-log", stdin) } },
    });
    conn = await RawConnection.open(server, "logged");
  });
  after(() => server.stop());

  const post = (body: string | Buffer, extra: Record<string, string> = {}) =>
    fetch(`${server.baseUrl}/v2/rpc`, {
      method: "POST",
      headers: conn.headers({ "content-type": "application/json", ...extra }),
      body: typeof body === "string" ? body : new Uint8Array(body),
    });

  it("refuses each invalid body with the same 400 problem, and the agent sees none", async () => {
    for (const row of REFUSED) {
      const response = await post(row.body);
      assert.equal(response.status, 400, row.name);
      assert.equal(response.headers.get("content-type"), "application/problem+json", row.name);
      const problem = (await response.json()) as { detail: string; jsonrpcError?: { code: number } };
      assert.equal(problem.jsonrpcError?.code, row.code, row.name);
      if (row.code === -32700)
        assert.ok(problem.detail.startsWith(row.detail), `${row.name}: ${problem.detail}`);
      else assert.equal(problem.detail, row.detail, row.name);
    }
    // A later message in the agent's log means every earlier one that reached it is there too.
    assert.equal((await post('{"jsonrpc":"2.0","method":"_x/after-refused"}')).status, 202);
    await waitFor(() => lines().some((l) => l.includes("_x/after-refused")), 10_000, "sentinel");
    assert.ok(!lines().some((l) => l.includes("probe/bad")), "no refused body reached the agent");
  });

  it("forwards odd but valid bodies as one line, and their answers come back", async () => {
    const sse = await conn.openSse();
    for (const row of ACCEPTED) assert.equal((await post(row.body)).status, 202, row.name);
    for (const row of ACCEPTED) {
      const id = idOf(row);
      const answer = await sse.waitFor((m) => m.id === id && m.method === undefined);
      assert.equal(answer.error?.code, -32601, row.name); // the mock agent knows no probe/ok
      const text = typeof row.body === "string" ? row.body : row.body.toString("utf8");
      const line = row.line ?? text.trim();
      assert.ok(lines().includes(line), `${row.name}: the agent received ${line}`);
    }
    sse.close();
  });

  it("a prompt written oddly reaches the agent byte for byte and is answered", async () => {
    const sse = await conn.openSse();
    const sessionId = await conn.newSession(sse);
    const text = 'echo h\\u00e9llo \\"q\\" \\\\ ✓ 🎉 \\ud83c\\udf89';
    const body =
      `\t{ "params" : { "prompt" : [ { "text" : "${text}" , "type":"text" } ] , "sessionId" : "${sessionId}" } ,` +
      ` "method":"session/prompt" , "id" : "odd-1" , "jsonrpc" : "2.0" }  \n`;
    assert.equal((await post(body, { "acp-session-id": sessionId })).status, 202);
    const answer = await sse.waitFor((m) => m.id === "odd-1");
    assert.equal((answer.result as { stopReason?: string } | undefined)?.stopReason, "end_turn");
    assert.equal(agentText(sse.messages(), sessionId), 'héllo "q" \\ ✓ 🎉 🎉');
    assert.ok(lines().includes(body.trim()), "the agent received the body as sent");
    // The session header is still checked against params.sessionId.
    const mismatched = await post(body.replace("odd-1", "odd-2"), { "acp-session-id": "another" });
    assert.equal(mismatched.status, 400);
    sse.close();
  });
});

describe("WebSocket frames: the envelope scan answers as the full parse did", { timeout: 60_000 }, () => {
  const stdin = stdinLog();
  let server: RunningServer;
  let ws: WsRpc;

  before(async () => {
    server = await startServer({ config: { agents: { logged: mockWith("--stdin-log", stdin) } } });
    ws = await openWs(server.baseUrl, { headers: server.headers() });
    ws.send({
      id: 0,
      method: "initialize",
      params: {
        protocolVersion: 1,
        clientCapabilities: {},
        _meta: { "sandboxagent.dev": { agent: "logged" } },
      },
    });
    await ws.waitFor((m) => m.id === 0);
  });
  after(() => {
    ws.ws.close();
    return server.stop();
  });

  /** The next frame after the `seen` first ones. */
  const next = async (seen: number): Promise<RpcMessage> => {
    await ws.waitFor(() => ws.frames.length > seen);
    return ws.frames[seen]!;
  };

  it("answers each invalid frame with the same JSON-RPC error", async () => {
    // Text frames must be UTF-8 (RFC 6455): those rows cannot be sent as text.
    for (const row of REFUSED.filter((r) => typeof r.body === "string")) {
      const seen = ws.frames.length;
      ws.ws.send(row.body);
      const answer = await next(seen);
      assert.equal(answer.id, null, row.name);
      assert.equal(answer.error?.code, row.code, row.name);
      if (row.code === -32700) assert.ok(answer.error!.message.startsWith(row.detail), row.name);
      else assert.equal(answer.error!.message, row.detail, row.name);
    }
    ws.send({ method: "_x/after-refused" });
    await waitFor(() => readFileSync(stdin, "utf8").includes("_x/after-refused"), 10_000, "sentinel");
    assert.ok(!readFileSync(stdin, "utf8").includes("probe/bad"), "no refused frame reached the agent");
  });

  it("forwards odd but valid frames as one line, and answers them", async () => {
    for (const row of ACCEPTED.filter((r) => typeof r.body === "string")) {
      const seen = ws.frames.length;
      ws.ws.send(row.body);
      const answer = await next(seen);
      assert.ok(answer.id === idOf(row), row.name); // === : the agent answers id -0 as 0
      assert.equal(answer.error?.code, -32601, row.name);
      const line = row.line ?? (row.body as string).trim();
      assert.ok(readFileSync(stdin, "utf8").split("\n").includes(line), row.name);
    }
  });
});

describe("scanEnvelope against parseMessage", () => {
  const bytes = (body: string | Buffer) => (typeof body === "string" ? Buffer.from(body) : body);

  /** The scan's reading of `body` is the parse's, when the scan takes it at all. */
  function agrees(body: Buffer): boolean {
    const scanned = scanEnvelope(body);
    if (scanned === undefined) return false;
    const parsed = parseMessage(body); // throws if the scan took an invalid body
    assert.ok(Object.is(scanned.message.id, parsed.message.id) || scanned.message.id === parsed.message.id);
    assert.equal(scanned.message.method, parsed.message.method);
    assert.equal(scanned.sessionId, parsed.sessionId);
    assert.ok(!/[\r\n]/.test(scanned.line));
    assert.deepEqual(JSON.parse(scanned.line), JSON.parse(parsed.line));
    return true;
  }

  it("takes no invalid body", () => {
    for (const row of REFUSED) assert.equal(scanEnvelope(bytes(row.body)), undefined, row.name);
  });

  it("reads the common bodies itself, and leaves the doubtful ones to the parse", () => {
    const taken = new Set([
      "plain",
      "surrounding whitespace and a final newline",
      "no params",
      "a huge number in params",
      "a string id of 1,024 characters",
      "id -(2^53-1)",
      "nested 128 levels deep",
    ]);
    for (const row of ACCEPTED) assert.equal(agrees(bytes(row.body)), taken.has(row.name), row.name);
    const prompt = {
      jsonrpc: "2.0",
      id: "p-1",
      method: "session/prompt",
      params: { sessionId: "s é", prompt: [{ type: "text", text: 'a "b" \\ \n ✓ \u2028' }] },
    };
    assert.ok(agrees(Buffer.from(JSON.stringify(prompt))));
    assert.equal(scanEnvelope(Buffer.from(JSON.stringify(prompt)))!.sessionId, "s é");
    const twice = '{"jsonrpc":"2.0","id":1,"method":"m","params":{"sessionId":"a","sessionId":2}}';
    assert.ok(agrees(Buffer.from(twice)));
    const escapedKey = '{"jsonrpc":"2.0","id":1,"method":"m","params":{"session\\u0049d":"a"}}';
    assert.equal(scanEnvelope(Buffer.from(escapedKey)), undefined);
  });

  it("tells the member names and the version apart by every byte", () => {
    const body = (jsonrpc: string, id: string, method: string, params: string, sessionId: string) =>
      Buffer.from(`{"${jsonrpc}":"2.0","${id}":7,"${method}":"m","${params}":{"${sessionId}":"s","x":1}}`);
    const names = ["jsonrpc", "id", "method", "params", "sessionId"] as const;
    assert.equal(scanEnvelope(body(...names))?.sessionId, "s");
    for (let n = 0; n < names.length; n++) {
      const name = names[n]!;
      for (let i = 0; i < name.length; i++) {
        const other = [...names] as string[];
        other[n] = name.slice(0, i) + String.fromCharCode(name.charCodeAt(i) ^ 1) + name.slice(i + 1);
        const scanned = scanEnvelope(body(...(other as [string, string, string, string, string])));
        // A params member that is not `sessionId` is any member; an envelope member that is not one is refused.
        if (n === 4) assert.equal(scanned?.sessionId, undefined, other[n]);
        else assert.equal(scanned, undefined, other[n]);
      }
    }
    for (const version of ['"2.1"', '"3.0"', '"2,0"', '"2.0 "', "2.000", '"2.0\\"', '"\\u0032"'])
      assert.equal(
        scanEnvelope(Buffer.from(`{"jsonrpc":${version},"id":1,"method":"m"}`)),
        undefined,
        version,
      );
    assert.ok(agrees(Buffer.from('{"jsonrpc":"2.0","id":1,"method":"m","params":{"sessionId":true}}')));
  });

  it("agrees with the parse on 50,000 mutated bodies", () => {
    const seeds = [
      '{"jsonrpc":"2.0","id":12,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi \\"x\\" é"}]}}',
      '{ "id" : "a\\u0062" , "params" : { "x" : [ 1.5e-3 , -0 , true , null , { } , [ ] ] } , "method" : "m" , "jsonrpc" : "2.0" }',
      '{"jsonrpc":"2.0","id":-42,"method":"x/y"}',
    ];
    const alphabet = ' \t\n{}[]":,\\/-+.0123456789eEtrufalsnu\u00e9\u2603abcdijmop';
    let state = 0x9e3779b9;
    const random = (n: number) => {
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      return (state >>> 0) % n;
    };
    let taken = 0;
    for (let i = 0; i < 50_000; i++) {
      let text = seeds[random(seeds.length)]!;
      for (let m = 1 + random(3); m > 0; m--) {
        const at = random(text.length + 1);
        const c = alphabet[random(alphabet.length)]!;
        const op = random(3);
        text = text.slice(0, at) + (op === 2 ? "" : c) + text.slice(op === 0 ? at : at + 1);
      }
      try {
        if (agrees(Buffer.from(text))) taken++;
      } catch (error) {
        assert.fail(`${text}: ${String(error)}`);
      }
    }
    assert.ok(taken > 2_000, `the scan took ${taken}`);
  });
});
