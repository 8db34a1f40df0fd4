import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { startServer, type RunningServer } from "@sandbox-agent/testkit";
import { changedSince, raceTree, snapshot, startFlipper } from "./support/flipper.js";

/** Requests are sent for at least this long while the hostile process swaps… */
const FLIP_MS = 6000;
/** …and for at least this many rounds (one request per operation each), however slow the machine… */
const MIN_ROUNDS = 12;
/** …and at most this many rounds, or for this long. */
const MAX_ROUNDS = 400;
const MAX_MS = 120_000;
const SECRET = "outside the root";

interface Outcome {
  operation: string;
  status: number;
  body: string;
}

/**
 * A local process swaps a directory of the root for a symlink to a directory outside it, as fast
 * as it can, while a client reads, lists, stats, uploads, writes, creates, moves and deletes
 * below that directory. Every step must either act inside the root or fail: nothing outside may be
 * read, listed, created, changed or deleted.
 */
describe("filesystem API against a hostile process swapping a directory for a symlink", () => {
  let server: RunningServer;
  let root: string;
  let outside: string;
  let before_: Map<string, string>;

  before(async () => {
    ({ root, outside } = raceTree("fs-race", SECRET));
    writeFileSync(path.join(outside, "steal.txt"), SECRET);
    for (let i = 0; i < MAX_ROUNDS; i++) {
      writeFileSync(path.join(outside, `victim-${i}.txt`), SECRET);
      writeFileSync(path.join(root, "d", `move-${i}.txt`), "inside");
    }
    mkdirSync(path.join(outside, "tree", "sub"), { recursive: true });
    writeFileSync(path.join(outside, "tree", "sub", "leaf.txt"), SECRET);
    before_ = snapshot(outside);
    server = await startServer({ args: ["--fs-root", root] });
  });
  after(() => server.stop());

  it("never reads, lists, writes, moves or deletes outside the root", async () => {
    const url = (endpoint: string, query: Record<string, string>) =>
      `${server.baseUrl}/v2/fs/${endpoint}?${new URLSearchParams(query).toString()}`;
    const send = async (operation: string, request: Promise<Response>): Promise<Outcome> => {
      const response = await request;
      return { operation, status: response.status, body: await response.text() };
    };
    const post = (endpoint: string, body: unknown) =>
      fetch(url(endpoint, {}), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const round = (i: number): Promise<Outcome>[] => [
      send("read", fetch(url("file", { path: "d/file.txt" }))),
      send("stat", fetch(url("stat", { path: "d/only-outside.txt" }))),
      send("list", fetch(url("list", { path: "d" }))),
      send("upload", fetch(url("file", { path: `d/upload-${i}.txt` }), { method: "PUT", body: "x" })),
      send("write", post("write", { path: `d/write-${i}.txt`, content: "x" })),
      send("mkdir", post("mkdir", { path: `d/dir-${i}/sub`, recursive: true })),
      send("move", post("move", { from: `d/move-${i}.txt`, to: `d/moved-${i}.txt` })),
      send("move-out", post("move", { from: "d/steal.txt", to: `stolen-${i}.txt` })),
      send("delete", fetch(url("file", { path: `d/victim-${i}.txt` }), { method: "DELETE" })),
      send("delete-tree", fetch(url("file", { path: "d/tree", recursive: "true" }), { method: "DELETE" })),
    ];

    const flipper = startFlipper(path.join(root, "d"), outside, MAX_MS);
    const outcomes: Outcome[] = [];
    const started = Date.now();
    let flips = 0;
    try {
      for (let i = 0; i < MAX_ROUNDS && flipper.running; i++) {
        if (i >= MIN_ROUNDS && Date.now() - started >= FLIP_MS) break;
        outcomes.push(...(await Promise.all(round(i))));
      }
    } finally {
      flips = await flipper.stop();
    }
    const seconds = ((Date.now() - started) / 1000).toFixed(1);

    const leaks = outcomes.filter(
      (o) =>
        o.status >= 500 ||
        o.body.includes(SECRET) ||
        (o.operation === "stat" && o.status === 200) ||
        (o.operation === "list" && o.body.includes("only-outside")) ||
        (o.operation === "move-out" && o.status === 200),
    );
    const changed = changedSince(before_, outside);
    const byStatus = new Map<string, number>();
    for (const o of outcomes)
      byStatus.set(`${o.operation} ${o.status}`, (byStatus.get(`${o.operation} ${o.status}`) ?? 0) + 1);
    const summary = `${outcomes.length} requests in ${seconds} s against ${flips} swaps: ${JSON.stringify(Object.fromEntries(byStatus))}`;
    process.stdout.write(`# ${summary}\n`);
    assert.ok(outcomes.length >= 100, `too few requests to mean anything: ${summary}`);
    assert.ok(flips >= 1000, `the hostile process barely ran: ${summary}`);
    assert.deepEqual(leaks.slice(0, 5), [], `requests reached outside the root: ${summary}`);
    assert.deepEqual(changed, [], `changed outside the root: ${summary}`);
    assert.equal(readFileSync(path.join(root, "d", "file.txt"), "utf8"), "inside");
  });
});
