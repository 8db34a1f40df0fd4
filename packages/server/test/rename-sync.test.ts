/**
 * A file put over another by a rename (the index's snapshot; the request journal's rewrite with
 * fsync) has its directory synced before anything relies on the new name: `fdatasync` of the file
 * covers its bytes, not the directory entry, and a power loss could otherwise bring back the old
 * file after the index journal it replaced was emptied. `fs.fsyncSync` is watched for a
 * descriptor of a directory.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, describe, it } from "node:test";
import { tempDir } from "@sandbox-agent/testkit";
import { RequestJournal } from "../src/store/request-journal.js";
import { IndexJournal } from "../src/store/tables.js";

const synced: string[] = [];
const fsyncSync = fs.fsyncSync;

describe("renames over a file sync the directory", () => {
  before(() => {
    fs.fsyncSync = (fd: number) => {
      if (fs.fstatSync(fd).isDirectory()) synced.push(fs.readlinkSync(`/proc/self/fd/${fd}`));
      fsyncSync(fd);
    };
  });
  after(() => {
    fs.fsyncSync = fsyncSync;
  });

  it("the index's snapshot: its directory is synced before the journal is emptied", () => {
    const dir = tempDir("index-");
    const index = IndexJournal.open(dir, () => undefined);
    const table = index.table<string>("t");
    // 70 changes of 64 KiB: the journal passes 4 MiB and the (empty) snapshot, so the checkpoint folds it.
    for (let i = 0; i < 70; i++) table.set("key", "x".repeat(64 * 1024) + i);
    synced.length = 0;
    index.checkpoint();
    assert.equal(fs.statSync(`${dir}/index.journal`).size, 0, "folded into the snapshot");
    assert.deepEqual(synced, [fs.realpathSync(dir)]);
    index.close();
  });

  it("the request journal's rewrite: its directory is synced with fsync, not without", () => {
    for (const fsync of [true, false]) {
      const dir = tempDir("requests-");
      const journal = RequestJournal.create(dir, fsync);
      journal.add("long-running", 1);
      for (let i = 0; i < 10_000; i++) {
        journal.add(i, 2);
        journal.remove(i);
      }
      synced.length = 0;
      journal.checkpoint(10_000);
      assert.equal(fs.readFileSync(`${dir}/requests.journal`, "utf8"), '+10001 "long-running"\n');
      assert.deepEqual(synced, fsync ? [fs.realpathSync(dir)] : [], `fsync: ${fsync}`);
      journal.close();
    }
  });
});
