// Generators for the fuzz test: JSON texts, JSON-RPC messages, control-plane requests and
// malformed HTTP/1.1, all drawn from one seeded generator so that a seed replays a run.

/** mulberry32: small, fast and good enough to drive a fuzzer reproducibly. */
export class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
}

const KEYS = [
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "_meta",
  "sandboxagent.dev",
  "sessionId",
  "id",
  "jsonrpc",
  "method",
  "params",
  "agent",
  "env",
  "metadata",
  "",
  "a",
  "ü",
  "\\u0000",
];
const STRINGS = [
  "",
  "x",
  "ü😀",
  "\\u2028\\u2029",
  "\\ud800",
  "\\udfff\\ud800",
  "\\u0000",
  "line\\nbreak\\r",
  'tab\\t\\"quote\\\\',
  "%ZZ",
  "../../etc/passwd",
  "<script>",
  "${env}",
];
const NUMBERS = [
  "0",
  "-0",
  "1",
  "-1",
  "1.5",
  "1e400",
  "-1e400",
  "1e-400",
  "9007199254740993",
  "123456789012345678901234567890",
  "0.1e1",
];

export function jsonString(rng: Rng): string {
  if (rng.chance(0.02)) return `"${"s".repeat(rng.pick([1024, 1025, 70_000]))}"`;
  if (rng.chance(0.5)) return `"${rng.pick(STRINGS)}"`;
  let text = "";
  for (let i = rng.int(12); i > 0; i--)
    text += String.fromCharCode(0x20 + rng.int(0x5e)).replace(/["\\]/, "_");
  return `"${text}"`;
}

/** A random JSON text, at most `maxDepth` levels deep. */
export function jsonValue(rng: Rng, maxDepth = 5): string {
  const roll = rng.int(10);
  if (maxDepth <= 0 || roll < 5) {
    if (roll === 0) return rng.pick(["null", "true", "false"]);
    if (roll < 3) return rng.pick(NUMBERS);
    return jsonString(rng);
  }
  const count = rng.int(5);
  if (roll < 7) return `[${Array.from({ length: count }, () => jsonValue(rng, maxDepth - 1)).join(",")}]`;
  const members = Array.from({ length: count }, () => `${keyOf(rng)}:${jsonValue(rng, maxDepth - 1)}`);
  return `{${members.join(",")}}`;
}

function keyOf(rng: Rng): string {
  return rng.chance(0.7) ? `"${rng.pick(KEYS)}"` : jsonString(rng);
}

/** `depth` nested arrays or objects around `inner`. */
export function nested(depth: number, inner = "1", kind: "array" | "object" = "array"): string {
  return kind === "array"
    ? "[".repeat(depth) + inner + "]".repeat(depth)
    : '{"a":'.repeat(depth) + inner + "}".repeat(depth);
}

/** A JSON value that is sometimes very deep (around the server's limit, or far past it). */
export function maybeDeep(rng: Rng): string {
  if (rng.chance(0.85)) return jsonValue(rng);
  const depth = rng.pick([100, 128, 129, 500, 5000, 20_000]);
  return nested(depth, jsonValue(rng, 1), rng.chance(0.5) ? "array" : "object");
}

export const ODD_IDS = [
  "1e400",
  "-1e400",
  "1.5",
  "1.0",
  "1e3",
  "-0",
  "0",
  "9007199254740991",
  "9007199254740992",
  "-9007199254740993",
  "123456789012345678901234567890",
  "null",
  "true",
  "[]",
  "{}",
  '{"__proto__":{"polluted":1}}',
  '""',
  '"\\u0000"',
  '"ü😀"',
];

export function idOf(rng: Rng, counter: number): string {
  if (rng.chance(0.5)) return String(counter);
  if (rng.chance(0.1)) return nested(rng.pick([3, 200, 5000]));
  if (rng.chance(0.1)) return `"${"i".repeat(rng.pick([1024, 1025, 100_000]))}"`;
  return rng.chance(0.8) ? rng.pick(ODD_IDS) : jsonString(rng);
}

const METHODS = [
  "session/new",
  "session/load",
  "session/prompt",
  "session/list",
  "session/cancel",
  "session/set_mode",
  "session/set_config_option",
  "_sandboxagent/session/detach",
  "_sandboxagent/session/terminate",
  "_sandboxagent/session/list_models",
  "_sandboxagent/session/set_metadata",
  "_sandboxagent/session/unknown",
  "_sandboxagent/agent/unparsed",
  "_vendor/x",
  "initialize",
  "",
  "__proto__",
];

/** Prompts the mock agent runs: unknown words are echoed; these commands are cheap and bounded. */
const PROMPTS = [
  "hello",
  "echo fuzz",
  "think deep",
  "garbage not json",
  'garbage {\\"jsonrpc\\":\\"2.0\\"',
  "permission allow?",
  "ext _mock/ping {}",
  "ext-request _mock/ask {}",
  'json {\\"a\\":1}',
  "error -32000 nope",
  "stop refusal",
  "sleep 5",
  "chunks 3",
  "unknown-update",
  "title fuzz",
  "meta",
  "bigline 70000",
  "chunks many",
];

/**
 * Stand for the live connection's id and its session's id in generated requests (which are made
 * before either exists, so that a seed always yields the same cases); replaced when sent.
 */
export const LIVE_CONNECTION = "live-connection-id";
export const LIVE_SESSION = "live-session-id";

export interface RpcContext {
  /** The next numeric request id. */
  counter: number;
}

function paramsFor(rng: Rng, method: string): string {
  const session = rng.chance(0.8) ? `"${LIVE_SESSION}"` : jsonString(rng);
  const meta = rng.chance(0.5) ? `,"_meta":{"sandboxagent.dev":${maybeDeep(rng)}}` : "";
  switch (method) {
    case "session/new":
      return `{"cwd":${rng.pick(['"/tmp"', '"relative"', "1", jsonString(rng)])},"mcpServers":${rng.chance(0.9) ? "[]" : jsonValue(rng)}${meta}}`;
    case "session/prompt":
      return `{"sessionId":${session},"prompt":[{"type":"text","text":"${rng.pick(PROMPTS)}"}]${meta}}`;
    case "_sandboxagent/session/set_metadata":
      return `{"sessionId":${session},"metadata":${maybeDeep(rng)}${meta}}`;
    case "session/list":
      return rng.chance(0.5) ? "{}" : `{"cwd":"/tmp"${meta}}`;
    default:
      return rng.chance(0.7) ? `{"sessionId":${session}${meta}}` : maybeDeep(rng);
  }
}

/** A JSON-RPC message text for the live connection (sometimes broken on purpose). */
export function rpcMessage(rng: Rng, ctx: RpcContext): string {
  const members: string[] = [];
  if (!rng.chance(0.03)) members.push(`"jsonrpc":${rng.chance(0.95) ? '"2.0"' : jsonValue(rng, 1)}`);
  const kind = rng.int(10);
  if (kind < 6) {
    const method = rng.chance(0.9) ? rng.pick(METHODS) : jsonString(rng).slice(1, -1);
    members.push(
      `"id":${idOf(rng, ctx.counter++)}`,
      `"method":"${method}"`,
      `"params":${paramsFor(rng, method)}`,
    );
  } else if (kind < 8) {
    const method = rng.pick(METHODS);
    members.push(`"method":"${method}"`, `"params":${paramsFor(rng, method)}`);
  } else if (kind < 9) {
    members.push(
      `"id":${idOf(rng, ctx.counter++)}`,
      rng.chance(0.5) ? `"result":${maybeDeep(rng)}` : `"error":${jsonValue(rng, 2)}`,
    );
  } else {
    for (let i = rng.int(4); i > 0; i--) members.push(`${keyOf(rng)}:${maybeDeep(rng)}`);
  }
  if (rng.chance(0.05)) members.push(`"__proto__":{"polluted":true}`);
  // Newlines between members make the server re-serialize the body (NDJSON).
  const separator = rng.chance(0.2) ? ",\n" : ",";
  return mutate(rng, `{${members.join(separator)}}`);
}

/** Occasionally breaks a text: truncation, a stray byte, a BOM. */
export function mutate(rng: Rng, text: string): string {
  if (!rng.chance(0.1)) return text;
  const at = rng.int(text.length + 1);
  switch (rng.int(4)) {
    case 0:
      return text.slice(0, at);
    case 1:
      return text.slice(0, at) + String.fromCharCode(rng.int(256)) + text.slice(at);
    case 2:
      return "\ufeff" + text;
    default:
      return text.slice(0, at) + "\u0000" + text.slice(at + 1);
  }
}

const FS_PATHS = [
  "/",
  "",
  ".",
  "..",
  "../x",
  "a/../../b",
  "%2e%2e/%2e%2e/etc/passwd",
  "%ZZ",
  "%",
  "%00",
  "a%2Fb",
  "loop-a",
  "loop-a/x",
  "link-out",
  "link-out/x",
  "dir",
  "dir/file.txt",
  "dir/sub",
  "file.txt",
  "file.txt/x",
  "agent.sock",
  "%C3%BC/%F0%9F%98%80",
  "a\\b",
  "//x",
  "x%3Fy",
  "+",
  "%20",
];

export function fsPath(rng: Rng): string {
  if (rng.chance(0.05)) return "n".repeat(rng.pick([255, 256, 300]));
  if (rng.chance(0.03)) return Array.from({ length: 16 }, () => "d".repeat(255)).join("/");
  if (rng.chance(0.2)) return `fz-${rng.int(20)}${rng.chance(0.3) ? `/fz-${rng.int(5)}` : ""}`;
  return rng.pick(FS_PATHS);
}

export interface HttpRequestSpec {
  method: string;
  target: string;
  headers: string[];
  body: string;
}

/** A control-plane request: agents and the filesystem, with odd paths, queries and bodies. */
export function controlPlaneRequest(rng: Rng): HttpRequestSpec {
  const flag = () => rng.pick(["true", "false", "1", "", "%ZZ"]);
  const json = (): HttpRequestSpec["headers"] => [
    rng.chance(0.9)
      ? "Content-Type: application/json"
      : `Content-Type: ${rng.pick(["text/plain", "application/json; charset=utf-16", ""])}`,
  ];
  const choice = rng.int(12);
  const p = fsPath(rng);
  switch (choice) {
    case 0:
      return { method: rng.pick(["GET", "POST", "DELETE"]), target: "/v2/agents", headers: [], body: "" };
    case 1: {
      const id = rng.pick(["mock", "claude", "%ZZ", "%", "..", "__proto__", "%C0%80", "x".repeat(300)]);
      return { method: "GET", target: `/v2/agents/${id}`, headers: [], body: "" };
    }
    case 2: {
      // Only agents that need no npm run (mock) or do not exist: nothing reaches the network.
      const id = rng.pick(["mock", "nope", "%ZZ", "__proto__"]);
      const body = rng.pick(["", '{"version":"1.0.0"}', "{", jsonValue(rng, 2), nested(5000)]);
      return { method: "POST", target: `/v2/agents/${id}/install`, headers: json(), body };
    }
    case 3:
      return {
        method: "GET",
        target: `/v2/fs/list?path=${p}&recursive=${flag()}&limit=${rng.pick(["1", "0", "-1", "1e9", "x", "100"])}`,
        headers: [],
        body: "",
      };
    case 4:
      return { method: "GET", target: `/v2/fs/stat?path=${p}`, headers: [], body: "" };
    case 5: {
      const range = rng.chance(0.3)
        ? [
            `Range: ${rng.pick(["bytes=0-1", "bytes=-1", "bytes=5-2", "bytes=99999999999999999999-", "bytes=0-0,1-1", "x"])}`,
          ]
        : [];
      return { method: "GET", target: `/v2/fs/file?path=${p}`, headers: range, body: "" };
    }
    case 6:
      return {
        method: "PUT",
        target: `/v2/fs/file?path=${p}&overwrite=${flag()}&parents=${flag()}`,
        headers: [],
        body: rng.pick(["", "data", "x".repeat(5000)]),
      };
    case 7: {
      const body = rng.chance(0.7)
        ? `{"path":"${p}","content":${jsonString(rng)},"encoding":${rng.pick(['"utf8"', '"base64"', '"hex"'])},"overwrite":${rng.pick(["true", "false", '"no"'])},"parents":${rng.pick(["true", "false"])}}`
        : maybeDeep(rng);
      return { method: "POST", target: "/v2/fs/write", headers: json(), body: mutate(rng, body) };
    }
    case 8: {
      const body = rng.chance(0.7)
        ? `{"path":"${p}","recursive":${rng.pick(["true", "false", "1"])}}`
        : maybeDeep(rng);
      return { method: "POST", target: "/v2/fs/mkdir", headers: json(), body: mutate(rng, body) };
    }
    case 9: {
      const body = rng.chance(0.7)
        ? `{"from":"${p}","to":"${fsPath(rng)}","overwrite":${rng.pick(["true", "false"])}}`
        : maybeDeep(rng);
      return { method: "POST", target: "/v2/fs/move", headers: json(), body: mutate(rng, body) };
    }
    case 10:
      return { method: "DELETE", target: `/v2/fs/file?path=${p}&recursive=${flag()}`, headers: [], body: "" };
    default:
      return {
        method: rng.pick(["GET", "PATCH", "OPTIONS", "HEAD"]),
        target: rng.pick([
          "/v2/openapi.json",
          "/v2/health",
          "/v2/nope",
          "/v2/fs/",
          "/",
          "/v2/fs/list?path=%%%",
        ]),
        headers: rng.chance(0.3) ? ["Origin: http://evil.example"] : [],
        body: "",
      };
  }
}

/** Serializes a request as HTTP/1.1 with a correct Content-Length. */
export function http1(spec: HttpRequestSpec, extraHeaders: string[] = []): Buffer {
  const body = Buffer.from(spec.body, "utf8");
  const head = [
    `${spec.method} ${spec.target} HTTP/1.1`,
    "Host: 127.0.0.1",
    ...spec.headers,
    ...extraHeaders,
    `Content-Length: ${body.length}`,
    "Connection: close",
  ];
  return Buffer.concat([Buffer.from(head.join("\r\n") + "\r\n\r\n", "latin1"), body]);
}

export interface RawCase {
  bytes: Buffer;
  /** Leave the writing side open (an unfinished request the server must not wait on forever). */
  keepOpen?: boolean;
  pieces?: number;
}

/** A request node:http's parser has to refuse, or that bends the framing rules. */
export function malformedRequest(rng: Rng): RawCase {
  const line = (target = "/v2/health") =>
    `${rng.pick(["GET", "POST", "get", "G ET", "PRI", "\x00", "A".repeat(1000), "CONNECT", "TRACE"])} ${target} ${rng.pick(["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/1.1x", "", "HTTP/9.9"])}`;
  const post = (headers: string[], body: string) =>
    `POST /v2/fs/write HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${headers.map((h) => h + "\r\n").join("")}\r\n${body}`;
  const valid = '{"path":"/fz-body.txt","content":"x"}';
  const choice = rng.int(16);
  let text: string;
  switch (choice) {
    case 0: {
      const bytes = Buffer.alloc(1 + rng.int(200));
      for (let i = 0; i < bytes.length; i++) bytes[i] = rng.int(256);
      return { bytes };
    }
    case 1:
      text = `${line(rng.pick(["/v2/health", "*", "http://127.0.0.1/v2/health", "http://[::1", "//v2//rpc", "/v2/rpc?%%%", "/" + "a".repeat(10_000), "/v2/agents/%ZZ", "/\x7f", "/v2/fs/list?path=%ZZ"]))}\r\nHost: 127.0.0.1\r\n\r\n`;
      break;
    case 2:
      text = `GET /v2/health HTTP/1.1\r\nHost: 127.0.0.1\r\n${rng.pick(["Bad Header", " X: y", "X : y", "X:\x00y", "X\x7f: y", "X: a\r\n b", ": empty"])}\r\n\r\n`;
      break;
    case 3:
      text = post(
        [`Content-Length: ${rng.pick(["-1", "1, 2", "99999999999999999999", "0x10", "", "1 2"])}`],
        valid,
      );
      break;
    case 4:
      text = post(["Content-Length: 5", `Content-Length: ${rng.pick(["5", "6"])}`], "12345");
      break;
    case 5:
      text = post(["Content-Length: 5", "Transfer-Encoding: chunked"], "5\r\nabcde\r\n0\r\n\r\n");
      break;
    case 6: {
      const chunks = rng.pick([
        "ZZ\r\nabc\r\n0\r\n\r\n",
        "5\r\nabc\r\n0\r\n\r\n",
        "3\r\nabc0\r\n\r\n",
        `3;${"e".repeat(20_000)}\r\nabc\r\n0\r\n\r\n`,
        "3\r\nabc\r\n0\r\n",
        "-1\r\nabc\r\n0\r\n\r\n",
        "ffffffffffffffff\r\nabc\r\n",
        `${valid.length.toString(16)}\r\n${valid}\r\n0\r\nX-Trailer: y\r\n\r\n`,
      ]);
      text = post(
        [`Transfer-Encoding: ${rng.pick(["chunked", "chunked, gzip", "xchunked", "Chunked"])}`],
        chunks,
      );
      break;
    }
    case 7: {
      // Fewer bytes than declared, then the client half-closes (or stalls).
      const declared = valid.length + 1 + rng.int(1000);
      return {
        bytes: Buffer.from(post([`Content-Length: ${declared}`], valid), "latin1"),
        keepOpen: rng.chance(0.3),
      };
    }
    case 8:
      text = post([`Content-Length: ${17 * 1024 * 1024}`], valid);
      break;
    case 9:
      text = `GET /v2/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${"a".repeat(rng.pick([15_000, 20_000, 100_000]))}\r\n\r\n`;
      break;
    case 10:
      text = `GET /v2/health HTTP/1.1\r\nHost: 127.0.0.1\r\n${Array.from({ length: 3000 }, (_, i) => `X-${i}: v`).join("\r\n")}\r\n\r\n`;
      break;
    case 11:
      text = `GET /v2/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /v2/agents/%ZZ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n${rng.pick(["GARBAGE\r\n\r\n", "GET /v2/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"])}`;
      break;
    case 12:
      text = `GET /v2/health HTTP/1.1\r\n${rng.pick(["", "Host: evil.example\r\n", "Host: 127.0.0.1\r\nHost: 127.0.0.2\r\n", "Host: 127.0.0.1\r\nOrigin: null\r\n", "Host: 127.0.0.1\r\nAuthorization: Bearer\r\n"])}\r\n`;
      break;
    case 13:
      text = `POST /v2/rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: ${valid.length}\r\n\r\n${valid}`;
      break;
    case 14:
      text = `GET /v2/rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: ${rng.pick(["h2c", "websocket"])}\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n`;
      break;
    default:
      text = `GET /v2/health HTTP/1.0\r\n\r\n`;
  }
  return { bytes: Buffer.from(text, "latin1"), pieces: rng.chance(0.2) ? 1 + rng.int(8) : 1 };
}

/** One fuzz case, fully generated from the seed. */
export type FuzzCase =
  | {
      kind: string;
      transport: "http1";
      bytes: Buffer;
      keepOpen?: boolean;
      pieces?: number;
      timeoutMs?: number;
    }
  | { kind: string; transport: "h2c"; spec: HttpRequestSpec; headers: Record<string, string> }
  | { kind: string; transport: "h2c-raw"; bytes: Buffer };

/** Generates the cases of a run in a fixed order, so that a seed replays the same requests. */
export class CaseSource {
  private readonly rng: Rng;
  private readonly ctx: RpcContext = { counter: 1000 };
  private initializes = 0;

  constructor(
    seed: number,
    /** Initializes spawn an agent each: a few per run. */
    private readonly maxInitializes = 8,
  ) {
    this.rng = new Rng(seed);
  }

  /**
   * Known trouble, always first: deeply nested metadata stored and merged by the Sandbox extensions
   * (`set_metadata`; `session/new`'s `_meta` then `session/list`) and deep ids, around and far past the limit.
   */
  corpus(): FuzzCase[] {
    return [10, 128, 129, 5000, 20_000].flatMap((depth) => [
      this.rpc(
        "corpus set_metadata",
        `{"jsonrpc":"2.0","id":${this.ctx.counter++},"method":"_sandboxagent/session/set_metadata","params":{"sessionId":"${LIVE_SESSION}","metadata":${nested(depth, "1", "object")}}}`,
      ),
      this.rpc(
        "corpus session/new _meta",
        `{"jsonrpc":"2.0","id":${this.ctx.counter++},"method":"session/new","params":{"cwd":"/tmp","mcpServers":[],"_meta":{"sandboxagent.dev":${nested(depth, "{}", "object")}}}}`,
      ),
      this.rpc(
        "corpus session/list",
        `{"jsonrpc":"2.0","id":${this.ctx.counter++},"method":"session/list","params":{}}`,
      ),
      this.rpc("corpus deep id", `{"jsonrpc":"2.0",\n"id":${nested(depth)},"method":"session/list"}`),
    ]);
  }

  next(): FuzzCase {
    const rng = this.rng;
    const roll = rng.int(100);
    if (roll < 38) return this.rpc("rpc message", rpcMessage(rng, this.ctx), this.rpcHeaders());
    if (roll < 40 && this.initializes < this.maxInitializes) {
      this.initializes++;
      return this.initialize();
    }
    if (roll < 45) return this.rpcStream();
    if (roll < 75)
      return { kind: "control plane", transport: "http1", bytes: http1(controlPlaneRequest(rng)) };
    if (roll < 93) return { kind: "malformed http", transport: "http1", ...malformedRequest(rng) };
    if (roll < 98) return this.h2();
    const noise = Buffer.alloc(1 + rng.int(300));
    for (let i = 0; i < noise.length; i++) noise[i] = rng.int(256);
    const preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
    return { kind: "h2c garbage", transport: "h2c-raw", bytes: Buffer.concat([preface, noise]) };
  }

  private rpc(kind: string, body: string, headers: string[] = []): FuzzCase {
    const spec = {
      method: "POST",
      target: "/v2/rpc",
      headers: ["Content-Type: application/json", ...headers],
      body,
    };
    return { kind, transport: "http1", bytes: http1(spec, [`Acp-Connection-Id: ${LIVE_CONNECTION}`]) };
  }

  private rpcHeaders(): string[] {
    const rng = this.rng;
    const headers: string[] = [];
    if (rng.chance(0.05)) headers.push(`x-acp-connection-id: ${rng.pick(["other", LIVE_CONNECTION + "x"])}`);
    if (rng.chance(0.05)) headers.push(`Acp-Session-Id: ${rng.pick(["nope", LIVE_SESSION])}`);
    if (rng.chance(0.05)) headers.push(`Acp-Protocol-Version: ${rng.pick(["1", "2", "x"])}`);
    return headers;
  }

  private initialize(): FuzzCase {
    const rng = this.rng;
    const agent = rng.pick(['"mock"', '"nope"', '"__proto__"', jsonValue(rng, 1)]);
    const env = rng.pick([
      "",
      ',"env":{"PATH":"/x"}',
      ',"env":{"NOT_ALLOWED":"x"}',
      `,"env":${jsonValue(rng, 2)}`,
    ]);
    const id = rng.pick(["1", '"init"', "1e400", "1.5"]);
    const body = `{"jsonrpc":"2.0","id":${id},"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{},"_meta":{"sandboxagent.dev":{"agent":${agent}${env}},"x":${jsonValue(rng, 3)}}}}`;
    const spec = { method: "POST", target: "/v2/rpc", headers: ["Content-Type: application/json"], body };
    // Spawning an agent on a busy machine can take seconds.
    return { kind: "initialize", transport: "http1", bytes: http1(spec), timeoutMs: 15_000 };
  }

  /** GET/DELETE on /v2/rpc, never a valid takeover of the live stream: unknown ids, bad cursors, wrong Accept. */
  private rpcStream(): FuzzCase {
    const rng = this.rng;
    const id = rng.pick(["", "bogus", LIVE_CONNECTION]);
    const live = id === LIVE_CONNECTION;
    const cursor = rng.pick(["", "x", "00000000.1", "ffffffff.99999999999999999", "9".repeat(40)]);
    const headers = [`Accept: ${live ? "application/json" : rng.pick(["text/event-stream", "*/*", ""])}`];
    if (id) headers.push(`Acp-Connection-Id: ${id}`);
    if (cursor) headers.push(`Last-Event-ID: ${cursor}`);
    const method = live ? "GET" : rng.pick(["GET", "DELETE", "PUT", "HEAD"]);
    return {
      kind: "rpc stream",
      transport: "http1",
      bytes: http1({ method, target: "/v2/rpc", headers, body: "" }),
    };
  }

  private h2(): FuzzCase {
    const rng = this.rng;
    const spec: HttpRequestSpec = rng.chance(0.5)
      ? controlPlaneRequest(rng)
      : {
          method: "POST",
          target: "/v2/rpc",
          headers: ["Content-Type: application/json"],
          body: rpcMessage(rng, this.ctx),
        };
    const headers: Record<string, string> = {};
    for (const header of spec.headers) {
      const colon = header.indexOf(":");
      headers[header.slice(0, colon).toLowerCase()] = header.slice(colon + 1).trim();
    }
    if (spec.target === "/v2/rpc") headers["acp-connection-id"] = LIVE_CONNECTION;
    if (rng.chance(0.1)) headers.host = "elsewhere.example";
    return { kind: "h2c", transport: "h2c", spec, headers };
  }
}
