import assert from "node:assert/strict";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { startServer, tempDir, type RunningServer } from "@sandbox-agent/testkit";

interface Entry {
  name: string;
  path: string;
  type: string;
  size: number;
  mtime: string;
}

interface Problem {
  type: string;
  status: number;
  detail: string;
}

const PROBLEMS = "https://sandboxagent.dev/problems/";

describe("filesystem API", () => {
  let server: RunningServer;
  let root: string;
  let outside: string;

  const url = (endpoint: string, query: Record<string, string> = {}) =>
    `${server.baseUrl}/v2/fs/${endpoint}?${new URLSearchParams(query).toString()}`;
  const get = (endpoint: string, query: Record<string, string>, headers: Record<string, string> = {}) =>
    fetch(url(endpoint, query), { headers, signal: AbortSignal.timeout(10_000) });
  const put = (query: Record<string, string>, body: string | Uint8Array<ArrayBuffer>) =>
    fetch(url("file", query), { method: "PUT", body, signal: AbortSignal.timeout(10_000) });
  const del = (query: Record<string, string>) =>
    fetch(url("file", query), { method: "DELETE", signal: AbortSignal.timeout(10_000) });
  const post = (endpoint: string, body: unknown) =>
    fetch(url(endpoint), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
  const problem = async (response: Response, status: number, slug: string): Promise<Problem> => {
    assert.equal(response.status, status, `expected ${status} ${slug}`);
    assert.equal(response.headers.get("content-type"), "application/problem+json");
    const body = (await response.json()) as Problem;
    assert.equal(body.type, PROBLEMS + slug);
    assert.equal(body.status, status);
    return body;
  };
  const inRoot = (...parts: string[]) => path.join(root, ...parts);

  before(async () => {
    root = tempDir("fs-root-");
    outside = tempDir("fs-outside-");
    writeFileSync(path.join(outside, "secret.txt"), "top secret");
    writeFileSync(inRoot("hello.txt"), "hello world");
    mkdirSync(inRoot("dir/nested"), { recursive: true });
    writeFileSync(inRoot("dir/a.json"), '{"a":1}');
    writeFileSync(inRoot("dir/nested/deep.bin"), Buffer.from([0, 1, 2, 255]));
    symlinkSync("/etc", inRoot("etc-link"));
    symlinkSync(outside, inRoot("outside-dir"));
    symlinkSync(path.join(outside, "secret.txt"), inRoot("secret-link"));
    symlinkSync(path.join(outside, "not-yet.txt"), inRoot("dangling"));
    symlinkSync("hello.txt", inRoot("inside-link"));
    server = await startServer({ args: ["--fs-root", root] });
  });
  after(() => server.stop());

  describe("list and stat", () => {
    it("lists a directory with name, path, type, size and mtime", async () => {
      const response = await get("list", { path: "/" });
      assert.equal(response.status, 200);
      const body = (await response.json()) as { path: string; entries: Entry[]; truncated: boolean };
      assert.equal(body.path, "/");
      assert.equal(body.truncated, false);
      const byName = new Map(body.entries.map((e) => [e.name, e]));
      assert.deepEqual([...byName.keys()], readdirSync(root).sort());
      assert.deepEqual(byName.get("hello.txt"), {
        name: "hello.txt",
        path: "/hello.txt",
        type: "file",
        size: 11,
        mtime: lstatSync(inRoot("hello.txt")).mtime.toISOString(),
      });
      assert.equal(byName.get("dir")?.type, "directory");
      assert.equal(byName.get("etc-link")?.type, "symlink");
    });

    it("lists recursively without following symlinks, and honours limit", async () => {
      const all = (await (await get("list", { path: "dir", recursive: "true" })).json()) as {
        entries: Entry[];
      };
      assert.deepEqual(
        all.entries.map((e) => e.path),
        ["/dir/a.json", "/dir/nested", "/dir/nested/deep.bin"],
      );
      const rootAll = (await (await get("list", { recursive: "true" })).json()) as { entries: Entry[] };
      assert.ok(!rootAll.entries.some((e) => e.path.startsWith("/etc-link/")));
      const limited = (await (await get("list", { path: "dir", recursive: "true", limit: "2" })).json()) as {
        entries: Entry[];
        truncated: boolean;
      };
      assert.equal(limited.entries.length, 2);
      assert.equal(limited.truncated, true);
    });

    it("list: a missing directory is 404, a file is 409", async () => {
      await problem(await get("list", { path: "nope" }), 404, "not-found");
      await problem(await get("list", { path: "hello.txt" }), 409, "not-a-directory");
    });

    it("stat describes files and directories, following in-root symlinks", async () => {
      const file = (await (await get("stat", { path: "/dir/a.json" })).json()) as Entry;
      assert.deepEqual([file.type, file.size, file.path], ["file", 7, "/dir/a.json"]);
      const dir = (await (await get("stat", { path: "dir/nested/" })).json()) as Entry;
      assert.deepEqual([dir.type, dir.path, dir.name], ["directory", "/dir/nested", "nested"]);
      const link = (await (await get("stat", { path: "inside-link" })).json()) as Entry;
      assert.deepEqual([link.type, link.size], ["file", 11]);
      await problem(await get("stat", { path: "missing.txt" }), 404, "not-found");
      await problem(await get("stat", { path: "hello.txt/below" }), 404, "not-found");
    });
  });

  describe("download", () => {
    it("streams a file with content-type, content-length and accept-ranges", async () => {
      const response = await get("file", { path: "hello.txt" });
      assert.equal(response.status, 200);
      assert.equal(response.headers.get("content-type"), "text/plain; charset=utf-8");
      assert.equal(response.headers.get("content-length"), "11");
      assert.equal(response.headers.get("accept-ranges"), "bytes");
      assert.equal(await response.text(), "hello world");
      const binary = await get("file", { path: "dir/nested/deep.bin" });
      assert.equal(binary.headers.get("content-type"), "application/octet-stream");
      assert.deepEqual(new Uint8Array(await binary.arrayBuffer()), new Uint8Array([0, 1, 2, 255]));
    });

    it("serves single byte ranges with 206 and content-range", async () => {
      const cases: [string, string, string][] = [
        ["bytes=0-4", "hello", "bytes 0-4/11"],
        ["bytes=6-", "world", "bytes 6-10/11"],
        ["bytes=-3", "rld", "bytes 8-10/11"],
        ["bytes=6-100", "world", "bytes 6-10/11"],
      ];
      for (const [range, text, contentRange] of cases) {
        const response = await get("file", { path: "hello.txt" }, { range });
        assert.equal(response.status, 206, range);
        assert.equal(response.headers.get("content-range"), contentRange);
        assert.equal(response.headers.get("content-length"), String(text.length));
        assert.equal(await response.text(), text);
      }
    });

    it("answers 416 for unsatisfiable ranges and ignores multi-ranges", async () => {
      const unsatisfiable = await get("file", { path: "hello.txt" }, { range: "bytes=50-60" });
      assert.equal(unsatisfiable.headers.get("content-range"), "bytes */11");
      await problem(unsatisfiable, 416, "range-not-satisfiable");
      const multi = await get("file", { path: "hello.txt" }, { range: "bytes=0-1,3-4" });
      assert.equal(multi.status, 200);
      assert.equal(await multi.text(), "hello world");
    });

    it("a missing file is 404, a directory 409", async () => {
      await problem(await get("file", { path: "nope.txt" }), 404, "not-found");
      await problem(await get("file", { path: "dir" }), 409, "is-a-directory");
    });
  });

  describe("upload and write", () => {
    it("PUT creates (201), replaces (200) and refuses with overwrite=false (409)", async () => {
      const created = await put({ path: "up/one.txt", parents: "true" }, "first");
      assert.equal(created.status, 201);
      assert.deepEqual(((await created.json()) as Entry).path, "/up/one.txt");
      assert.equal(readFileSync(inRoot("up/one.txt"), "utf8"), "first");
      const replaced = await put({ path: "up/one.txt" }, "second!");
      assert.equal(replaced.status, 200);
      assert.equal(((await replaced.json()) as Entry).size, 7);
      await problem(await put({ path: "up/one.txt", overwrite: "false" }, "third"), 409, "already-exists");
      assert.equal(readFileSync(inRoot("up/one.txt"), "utf8"), "second!");
      assert.deepEqual(readdirSync(inRoot("up")), ["one.txt"], "no temp files are left behind");
    });

    it("PUT without parents=true into a missing directory is 404; onto a directory 409", async () => {
      await problem(await put({ path: "missing-dir/x.txt" }, "x"), 404, "not-found");
      assert.equal(existsSync(inRoot("missing-dir")), false);
      await problem(await put({ path: "dir" }, "x"), 409, "is-a-directory");
      await problem(await put({ path: "hello.txt/x" }, "x"), 409, "not-a-directory");
    });

    it("PUT stores binary bodies byte for byte", async () => {
      const bytes = new Uint8Array(70_000).map((_, i) => (i * 31) % 256);
      assert.equal((await put({ path: "bin.dat" }, bytes)).status, 201);
      assert.deepEqual(new Uint8Array(readFileSync(inRoot("bin.dat"))), bytes);
      const back = await get("file", { path: "bin.dat" });
      assert.deepEqual(new Uint8Array(await back.arrayBuffer()), bytes);
    });

    it("POST /v2/fs/write writes utf8 and base64 content", async () => {
      const text = await post("write", { path: "w/text.txt", content: "héllo", parents: true });
      assert.equal(text.status, 201);
      assert.equal(readFileSync(inRoot("w/text.txt"), "utf8"), "héllo");
      const b64 = await post("write", { path: "w/text.txt", content: "AAEC/w==", encoding: "base64" });
      assert.equal(b64.status, 200);
      assert.deepEqual([...readFileSync(inRoot("w/text.txt"))], [0, 1, 2, 255]);
      await problem(
        await post("write", { path: "w/text.txt", content: "x", overwrite: false }),
        409,
        "already-exists",
      );
      const bad = await problem(
        await post("write", { path: "w/b.bin", content: "not base64!", encoding: "base64" }),
        400,
        "validation-failed",
      );
      assert.match(bad.detail, /content/);
      assert.equal(existsSync(inRoot("w/b.bin")), false);
    });
  });

  describe("mkdir, move, delete", () => {
    it("mkdir creates (201), treats an existing dir as fine only when recursive", async () => {
      const made = await post("mkdir", { path: "m/a/b", recursive: true });
      assert.equal(made.status, 201);
      assert.equal(((await made.json()) as Entry).type, "directory");
      assert.ok(lstatSync(inRoot("m/a/b")).isDirectory());
      assert.equal((await post("mkdir", { path: "m/a/b", recursive: true })).status, 200);
      await problem(await post("mkdir", { path: "m/a/b" }), 409, "already-exists");
      await problem(await post("mkdir", { path: "hello.txt", recursive: true }), 409, "already-exists");
      await problem(await post("mkdir", { path: "nope/child" }), 404, "not-found");
      assert.equal((await post("mkdir", { path: "m/single" })).status, 201);
    });

    it("move renames, refuses to clobber unless overwrite, and 404s on a missing source", async () => {
      writeFileSync(inRoot("mv-a.txt"), "A");
      writeFileSync(inRoot("mv-b.txt"), "B");
      const moved = await post("move", { from: "mv-a.txt", to: "/mv-c.txt" });
      assert.equal(moved.status, 200);
      assert.equal(((await moved.json()) as Entry).path, "/mv-c.txt");
      assert.equal(existsSync(inRoot("mv-a.txt")), false);
      assert.equal(readFileSync(inRoot("mv-c.txt"), "utf8"), "A");
      await problem(await post("move", { from: "mv-c.txt", to: "mv-b.txt" }), 409, "already-exists");
      assert.equal(readFileSync(inRoot("mv-b.txt"), "utf8"), "B");
      assert.equal((await post("move", { from: "mv-c.txt", to: "mv-b.txt", overwrite: true })).status, 200);
      assert.equal(readFileSync(inRoot("mv-b.txt"), "utf8"), "A");
      await problem(await post("move", { from: "mv-c.txt", to: "mv-d.txt" }), 404, "not-found");
      await problem(await post("move", { from: "/", to: "elsewhere" }), 403, "forbidden");
    });

    it("move of a symlink moves the link, not its target", async () => {
      symlinkSync("hello.txt", inRoot("link-to-move"));
      assert.equal((await post("move", { from: "link-to-move", to: "moved-link" })).status, 200);
      assert.ok(lstatSync(inRoot("moved-link")).isSymbolicLink());
      assert.equal(readFileSync(inRoot("hello.txt"), "utf8"), "hello world");
    });

    it("delete removes files (204) and refuses non-empty directories unless recursive", async () => {
      writeFileSync(inRoot("del.txt"), "x");
      const deleted = await del({ path: "del.txt" });
      assert.equal(deleted.status, 204);
      assert.equal(existsSync(inRoot("del.txt")), false);
      await problem(await del({ path: "del.txt" }), 404, "not-found");
      mkdirSync(inRoot("del-dir/sub"), { recursive: true });
      await problem(await del({ path: "del-dir" }), 409, "not-empty");
      assert.equal((await del({ path: "del-dir/sub" })).status, 204);
      writeFileSync(inRoot("del-dir/f"), "x");
      assert.equal((await del({ path: "del-dir", recursive: "true" })).status, 204);
      assert.equal(existsSync(inRoot("del-dir")), false);
      await problem(await del({ path: "/", recursive: "true" }), 403, "forbidden");
    });

    it("deleting a symlink to a directory outside removes only the link", async () => {
      symlinkSync(outside, inRoot("outside-to-delete"));
      assert.equal((await del({ path: "outside-to-delete", recursive: "true" })).status, 204);
      assert.equal(existsSync(inRoot("outside-to-delete")), false);
      assert.equal(readFileSync(path.join(outside, "secret.txt"), "utf8"), "top secret");
    });
  });

  describe("path safety", () => {
    const escapes = [
      "../outside.txt",
      "dir/../../outside.txt",
      "/../../etc/passwd",
      "etc-link/passwd",
      "etc-link",
      "outside-dir/secret.txt",
      "outside-dir",
      "secret-link",
    ];

    it("rejects .., symlinks to outside and symlinked parents with 403 path-escape on every endpoint", async () => {
      for (const p of escapes) {
        await problem(await get("file", { path: p }), 403, "path-escape");
        await problem(await get("stat", { path: p }), 403, "path-escape");
        await problem(await get("list", { path: p }), 403, "path-escape");
      }
      for (const p of ["../x.txt", "outside-dir/new.txt", "etc-link/new.txt", "dangling", "secret-link"]) {
        await problem(await put({ path: p, parents: "true" }, "pwned"), 403, "path-escape");
        await problem(await post("write", { path: p, content: "pwned" }), 403, "path-escape");
        await problem(await post("mkdir", { path: `${p}/sub`, recursive: true }), 403, "path-escape");
        await problem(await post("mkdir", { path: p, recursive: true }), 403, "path-escape");
      }
      assert.deepEqual(readdirSync(outside), ["secret.txt"], "nothing was written outside the root");
      assert.equal(readFileSync(path.join(outside, "secret.txt"), "utf8"), "top secret");
    });

    it("rejects escapes in move (both ends) and delete through a symlinked parent", async () => {
      await problem(await post("move", { from: "hello.txt", to: "../stolen.txt" }), 403, "path-escape");
      await problem(
        await post("move", { from: "hello.txt", to: "outside-dir/stolen.txt" }),
        403,
        "path-escape",
      );
      await problem(
        await post("move", { from: "outside-dir/secret.txt", to: "mine.txt" }),
        403,
        "path-escape",
      );
      await problem(await del({ path: "outside-dir/secret.txt" }), 403, "path-escape");
      await problem(await del({ path: "../fs-outside" }), 403, "path-escape");
      assert.ok(existsSync(inRoot("hello.txt")));
      assert.equal(readFileSync(path.join(outside, "secret.txt"), "utf8"), "top secret");
    });

    it("decodes %2e%2e before checking, so encoded traversal is rejected too", async () => {
      const raw = `${server.baseUrl}/v2/fs/file?path=%2e%2e%2f%2e%2e%2fetc%2fpasswd`;
      await problem(await fetch(raw), 403, "path-escape");
      const mixed = `${server.baseUrl}/v2/fs/file?path=dir/%2E%2E/%2e%2e/x`;
      await problem(await fetch(mixed), 403, "path-escape");
    });

    it("treats absolute paths as relative to the root", async () => {
      await problem(await get("file", { path: "/etc/passwd" }), 404, "not-found");
      assert.equal(await (await get("file", { path: "/hello.txt" })).text(), "hello world");
      assert.equal(await (await get("file", { path: "//dir//a.json" })).text(), '{"a":1}');
    });

    it("rejects NUL bytes with 400", async () => {
      await problem(await get("file", { path: "hello.txt\0.png" }), 400, "validation-failed");
      await problem(await post("write", { path: "a\0b", content: "x" }), 400, "validation-failed");
    });

    it("follows symlinks that stay inside the root", async () => {
      assert.equal(await (await get("file", { path: "inside-link" })).text(), "hello world");
    });
  });

  describe("filesystem errors", () => {
    it("symlink loops and over-long names are 400, and no problem names a host path", async () => {
      symlinkSync("loop-b", inRoot("loop-a"));
      symlinkSync("loop-a", inRoot("loop-b"));
      const long = "n".repeat(300);
      // Within the API's 4,096 characters, but past PATH_MAX once below the root.
      const deepLong = Array.from({ length: 16 }, () => "d".repeat(255)).join("/");
      const answers = [
        [await get("stat", { path: "loop-a" }), 400],
        [await get("file", { path: "loop-a/x" }), 400],
        [await put({ path: "loop-a" }, "x"), 400],
        [await post("mkdir", { path: "loop-a/x", recursive: true }), 400],
        [await get("stat", { path: long }), 400],
        [await get("file", { path: `dir/${long}` }), 400],
        [await put({ path: long }, "x"), 400],
        [await post("mkdir", { path: long }), 400],
        [await post("move", { from: "hello.txt", to: long }), 400],
        [await del({ path: long }), 400],
        [await get("stat", { path: deepLong }), 400],
        [await put({ path: deepLong, parents: "true" }, "x"), 400],
      ] as const;
      for (const [response, status] of answers) {
        const body = await problem(response, status, "bad-request");
        assert.ok(!body.detail.includes(root), `host path in ${JSON.stringify(body)}`);
      }
    });

    it("a socket is 409 not-a-file, not a 500 naming its host path", async () => {
      const { createServer } = await import("node:net");
      const listener = createServer();
      await new Promise<void>((resolve) => listener.listen(inRoot("agent.sock"), resolve));
      try {
        const body = await problem(await get("file", { path: "agent.sock" }), 409, "not-a-file");
        assert.ok(!body.detail.includes(root), body.detail);
      } finally {
        listener.close();
      }
    });

    it("move with overwrite=false lets exactly one of many concurrent movers win", async () => {
      for (const kind of ["file", "directory"] as const) {
        const sources = Array.from({ length: 12 }, (_, i) => `race-${kind}-${i}`);
        for (const name of sources) {
          if (kind === "file") writeFileSync(inRoot(name), name);
          else mkdirSync(inRoot(name));
        }
        const target = `race-${kind}-target`;
        const responses = await Promise.all(sources.map((from) => post("move", { from, to: target })));
        const statuses = responses.map((r) => r.status).sort();
        assert.deepEqual(statuses, [200, ...Array(sources.length - 1).fill(409)], kind);
        const winner = sources[responses.findIndex((r) => r.status === 200)]!;
        assert.ok(!existsSync(inRoot(winner)), `${winner} was moved`);
        if (kind === "file") assert.equal(readFileSync(inRoot(target), "utf8"), winner);
        const left = sources.filter((name) => existsSync(inRoot(name)));
        assert.equal(left.length, sources.length - 1, "the losers stay where they were");
      }
    });
  });

  describe("root selection", () => {
    it("defaults to the workdir", async () => {
      const workdir = tempDir("fs-workdir-");
      writeFileSync(path.join(workdir, "in-workdir.txt"), "w");
      const other = await startServer({ args: ["--workdir", workdir] });
      try {
        const listing = (await (await fetch(`${other.baseUrl}/v2/fs/list`)).json()) as { entries: Entry[] };
        assert.deepEqual(
          listing.entries.map((e) => e.name),
          ["in-workdir.txt"],
        );
      } finally {
        await other.stop();
      }
    });

    it("refuses to start when --fs-root is missing or not a directory", async () => {
      for (const bad of [path.join(root, "no-such-dir"), inRoot("hello.txt")]) {
        await assert.rejects(
          startServer({ args: ["--fs-root", bad] }),
          /exited with 2[\s\S]*(not a directory|does not exist)/,
        );
      }
    });
  });
});
