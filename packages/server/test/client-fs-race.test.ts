import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { startServer, type RunningServer } from "@sandbox-agent/testkit";
import { changedSince, raceTree, snapshot, startFlipper } from "./support/flipper.js";
import { RawConnection, type RpcMessage } from "./support/rpc.js";

/** The agent keeps reading and writing for at least this long while the hostile process swaps. */
const FLIP_MS = 6000;
/** At most this many turns; each asks for ROUND reads and writes. */
const MAX_TURNS = 200;
/** At least this many turns however slow the machine (each sends ROUND × 4 requests). */
const MIN_TURNS = 5;
const MAX_MS = 120_000;
const ROUND = 10;
const SECRET = "outside the root";
const SERVE_FS = { _meta: { "sandboxagent.dev": { agent: "mock", serveClientCapabilities: { fs: true } } } };

/** The agent's messages of one session, one per command of the mock agent's script. */
function agentMessages(messages: RpcMessage[], sessionId: string): string[] {
  return messages
    .filter((m) => m.method === "session/update" && m.params?.sessionId === sessionId)
    .map((m) => m.params?.update as { sessionUpdate: string; content?: { type: string; text?: string } })
    .filter((u) => u.sessionUpdate === "agent_message_chunk" && u.content?.type === "text")
    .map((u) => u.content!.text!);
}

/**
 * The ACP client methods the server answers inside the sandbox (`fs/read_text_file`,
 * `fs/write_text_file`) against a local process that swaps a directory of the filesystem root for
 * a symlink to a directory outside it, as fast as it can: like the filesystem API, every read and
 * write must act inside the root or fail, and nothing outside may be read, created or changed.
 */
describe("served fs/* client methods against a hostile process swapping a directory for a symlink", () => {
  let server: RunningServer;
  let root: string;
  let outside: string;
  let before_: Map<string, string>;

  before(async () => {
    ({ root, outside } = raceTree("client-fs-race", SECRET));
    before_ = snapshot(outside);
    server = await startServer({ args: ["--workdir", root] });
  });
  after(() => server.stop());

  it("never reads or writes outside the root", async () => {
    const conn = await RawConnection.open(server, "mock", SERVE_FS);
    const sse = await conn.openSse();
    const sessionId = await conn.newSession(sse, root);
    // One turn: reads of a file inside and of one that exists only outside, writes of new files
    // (in d itself and in a new directory below it, so that parents are created).
    const script = (turn: number): string =>
      Array.from({ length: ROUND }, (_, i) => {
        const n = turn * ROUND + i;
        return [
          "read d/file.txt",
          "read d/only-outside.txt",
          `fs-write d/write-${n}.txt x`,
          `fs-write d/dir-${n}/new.txt x`,
        ].join("\n");
      }).join("\n");

    const flipper = startFlipper(path.join(root, "d"), outside, MAX_MS);
    const started = Date.now();
    let turns = 0;
    let flips = 0;
    try {
      for (; turns < MAX_TURNS && flipper.running; turns++) {
        if (turns >= MIN_TURNS && Date.now() - started >= FLIP_MS) break;
        const answer = await conn.prompt(sse, sessionId, script(turns), 60_000);
        assert.equal(answer.result?.stopReason, "end_turn", JSON.stringify(answer));
      }
    } finally {
      flips = await flipper.stop();
    }
    sse.close();
    await conn.delete();
    const seconds = ((Date.now() - started) / 1000).toFixed(1);

    const messages = agentMessages(sse.messages(), sessionId);
    const count = (pattern: RegExp) => messages.filter((m) => pattern.test(m)).length;
    const outcomes = {
      "read inside": count(/^read d\/file\.txt: inside$/),
      "read failed": count(/^read .* failed: /),
      wrote: count(/^fs-wrote /),
      "write failed": count(/^fs-write .* failed: /),
    };
    const summary = `${messages.length} requests in ${turns} turns, ${seconds} s, against ${flips} swaps: ${JSON.stringify(outcomes)}`;
    process.stdout.write(`# ${summary}\n`);
    // A raw system error (an errno message naming host paths) would be a failure nobody mapped.
    const leaks = messages.filter(
      (m) =>
        m.includes(SECRET) ||
        m.includes(outside) ||
        /^read d\/only-outside\.txt: /.test(m) ||
        / failed: -?\d+ E[A-Z]+: /.test(m),
    );
    const changed = changedSince(before_, outside);
    assert.equal(messages.length, turns * ROUND * 4, `one answer per request: ${summary}`);
    assert.ok(messages.length >= 200, `too few requests to mean anything: ${summary}`);
    assert.ok(flips >= 1000, `the hostile process barely ran: ${summary}`);
    assert.ok(outcomes["read inside"] > 0 && outcomes.wrote > 0, `nothing succeeded: ${summary}`);
    assert.deepEqual(leaks.slice(0, 5), [], `requests reached outside the root: ${summary}`);
    assert.deepEqual(changed.slice(0, 10), [], `changed outside the root: ${summary}`);
    assert.equal(readFileSync(path.join(root, "d", "file.txt"), "utf8"), "inside");
  });
});
