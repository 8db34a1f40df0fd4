import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { needService, startServer, tempDir, type RunningServer } from "@sandbox-agent/testkit";

/** Why a private mount namespace with a tmpfs cannot be had here, if it cannot. */
function mountNamespaceMissing(): string | undefined {
  if (process.getuid?.() !== 0) return "needs root (a tmpfs mounted in a private mount namespace)";
  const script = 'mount -t tmpfs tmpfs "$1"';
  const probe = spawnSync(
    "unshare",
    ["--mount", "--propagation", "private", "sh", "-c", script, "sh", tempDir()],
    {
      encoding: "utf8",
    },
  );
  if (probe.status === 0) return undefined;
  return `unshare --mount … mount -t tmpfs failed: ${probe.error?.message ?? probe.stderr}`;
}

/**
 * `rename(2)` cannot cross mount points, so a move onto another filesystem copies and deletes.
 * The server runs in its own mount namespace with a tmpfs mounted at `<root>/mnt`, which only it
 * sees: the copy is checked through the API, the way back also on disk.
 */
describe(
  "filesystem moves across mount points",
  { skip: needService("mount namespaces", mountNamespaceMissing()) },
  () => {
    let server: RunningServer;
    let root: string;
    let outside: string;

    before(async () => {
      root = tempDir("fs-xdev-root-");
      outside = tempDir("fs-xdev-outside-");
      mkdirSync(path.join(root, "mnt"));
      mkdirSync(path.join(root, "tree", "sub", "deeper"), { recursive: true });
      writeFileSync(path.join(root, "tree", "a.txt"), "alpha");
      writeFileSync(path.join(root, "tree", "sub", "deeper", "b.bin"), Buffer.from([0, 1, 2, 255]));
      chmodSync(path.join(root, "tree", "a.txt"), 0o751);
      symlinkSync("a.txt", path.join(root, "tree", "link-in"));
      symlinkSync(outside, path.join(root, "tree", "link-out"));
      writeFileSync(path.join(root, "single.txt"), "single");
      writeFileSync(path.join(root, "kept.txt"), "kept");
      const script = 'mount -t tmpfs tmpfs "$1" && shift && exec "$@"';
      const wrapper = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"];
      server = await startServer({
        args: ["--fs-root", root],
        wrapper: [...wrapper, path.join(root, "mnt")],
      });
    });
    after(() => server.stop());

    const move = (from: string, to: string, overwrite = false) =>
      fetch(`${server.baseUrl}/v2/fs/move`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ from, to, overwrite }),
      });
    const list = async (dir: string) => {
      const response = await fetch(`${server.baseUrl}/v2/fs/list?path=${dir}&recursive=true`);
      assert.equal(response.status, 200, await response.clone().text());
      const { entries } = (await response.json()) as { entries: Array<{ path: string; type: string }> };
      return entries.map((e) => `${e.path} ${e.type}`).sort();
    };

    it("moves a tree onto the tmpfs and back: contents, modes and symlinks (as links) kept", async () => {
      const there = await move("tree", "mnt/tree");
      assert.equal(there.status, 200, await there.text());
      assert.ok(!existsSync(path.join(root, "tree")), "the original is deleted");
      assert.deepEqual(await list("mnt/tree"), [
        "/mnt/tree/a.txt file",
        "/mnt/tree/link-in symlink",
        "/mnt/tree/link-out symlink",
        "/mnt/tree/sub directory",
        "/mnt/tree/sub/deeper directory",
        "/mnt/tree/sub/deeper/b.bin file",
      ]);
      assert.equal(await (await fetch(`${server.baseUrl}/v2/fs/file?path=mnt/tree/link-in`)).text(), "alpha");
      assert.equal((await fetch(`${server.baseUrl}/v2/fs/file?path=mnt/tree/link-out`)).status, 403);

      const back = await move("mnt/tree", "back");
      assert.equal(back.status, 200, await back.text());
      assert.equal(readFileSync(path.join(root, "back", "a.txt"), "utf8"), "alpha");
      assert.equal(lstatSync(path.join(root, "back", "a.txt")).mode & 0o777, 0o751);
      assert.deepEqual([...readFileSync(path.join(root, "back", "sub", "deeper", "b.bin"))], [0, 1, 2, 255]);
      assert.equal(readlinkSync(path.join(root, "back", "link-in")), "a.txt");
      assert.equal(readlinkSync(path.join(root, "back", "link-out")), outside);
      assert.deepEqual(await list("mnt"), [], "nothing left on the tmpfs");
      assert.deepEqual(readdirSync(outside), [], "nothing written through the outside link");
    });

    it("a file across devices: moved once, then refused without overwrite, leaving no temp copies", async () => {
      assert.equal((await move("single.txt", "mnt/single.txt")).status, 200);
      assert.ok(!existsSync(path.join(root, "single.txt")));
      assert.equal((await move("kept.txt", "mnt/single.txt")).status, 409);
      assert.equal(readFileSync(path.join(root, "kept.txt"), "utf8"), "kept");
      assert.equal(await (await fetch(`${server.baseUrl}/v2/fs/file?path=mnt/single.txt`)).text(), "single");
      assert.equal((await move("kept.txt", "mnt/single.txt", true)).status, 200);
      assert.equal(await (await fetch(`${server.baseUrl}/v2/fs/file?path=mnt/single.txt`)).text(), "kept");
      assert.deepEqual(await list("mnt"), ["/mnt/single.txt file"]);
    });
  },
);
