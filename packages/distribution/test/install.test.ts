import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { cp, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { repoRoot, tempDir } from "@sandbox-agent/testkit";
import { mustRun, typeCheckAndEmit } from "../src/index.js";

/**
 * What a user gets: `scripts/pack.mjs` packs the public packages, an empty project installs them
 * from the tarballs with npm, and a turn runs against the mock agent from an ES module, from
 * CommonJS and from TypeScript compiled against the installed declarations.
 *
 * npm runs with --prefer-offline: the packages' own dependencies come from the npm cache that
 * `npm ci` filled; only metadata npm has not cached yet is fetched, from the registry alone.
 */

interface Packed {
  name: string;
  file: string;
  internalDependencies: string[];
}

interface Turn {
  text: string;
  stopReason: string;
}

// The larger install (eight packages and their dependencies) took 60 s at load 9.
const NPM_TIMEOUT_MS = 240_000;
const RUN_TIMEOUT_MS = 60_000;
const NPM_FLAGS = [
  "--prefer-offline",
  "--no-audit",
  "--no-fund",
  "--loglevel=error",
  "--fetch-timeout=30000",
];
interface Manifest {
  name: string;
  private?: boolean;
  types?: string;
  exports?: Record<string, unknown>;
  files?: string[];
  bin?: Record<string, string>;
}

/** Every workspace package that is not private: what a user can install. */
function publicManifests(): Manifest[] {
  const root = JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8")) as {
    workspaces: string[];
  };
  return root.workspaces
    .map((dir) => JSON.parse(readFileSync(path.join(repoRoot, dir, "package.json"), "utf8")) as Manifest)
    .filter((manifest) => !manifest.private);
}

const MANIFESTS = publicManifests();
const PUBLIC = MANIFESTS.map((manifest) => manifest.name);
/** The packages a program imports (a `.` export; the inspector ships only its page). */
const IMPORTABLE = MANIFESTS.filter((manifest) => manifest.exports?.["."] !== undefined);

function lastJsonLine<T>(stdout: string): T {
  return JSON.parse(stdout.trim().split("\n").at(-1) ?? "null") as T;
}

describe("the packed packages, installed into an empty project", { timeout: 8 * 60_000 }, () => {
  const work = tempDir("sandbox-agent-install-");
  const app = path.join(work, "app");
  // Servers started by the SDK keep their data here, not in the user's home.
  const env = { SANDBOX_AGENT_DATA_DIR: path.join(work, "data") };
  let packed: Packed[];
  const timings: Record<string, number> = {};

  const npm = async (what: string, args: string[]): Promise<void> => {
    const result = await mustRun("npm", [...args, ...NPM_FLAGS], { cwd: app, timeoutMs: NPM_TIMEOUT_MS });
    timings[what] = result.durationMs;
  };
  const tarball = (name: string): string => {
    const found = packed.find((p) => p.name === name);
    assert.ok(found, `${name} was packed`);
    return found.file;
  };

  before(async () => {
    const result = await mustRun(
      process.execPath,
      [path.join(repoRoot, "scripts/pack.mjs"), "--out", path.join(work, "packages"), "--no-build", "--json"],
      { cwd: repoRoot, timeoutMs: NPM_TIMEOUT_MS },
    );
    timings.pack = result.durationMs;
    packed = JSON.parse(result.stdout) as Packed[];
    await cp(path.join(repoRoot, "packages/distribution/fixtures/app"), app, { recursive: true });
    await writeFile(path.join(app, "package.json"), JSON.stringify({ name: "app", private: true }) + "\n");
  });
  after(async () => {
    process.stderr.write(`install test timings (ms): ${JSON.stringify(timings)}\n`);
    await rm(work, { recursive: true, force: true });
  });

  it("packs every public package, internal dependencies pointing at sibling tarballs", () => {
    assert.deepEqual(packed.map((p) => p.name).sort(), [...PUBLIC].sort());
    assert.deepEqual(packed.find((p) => p.name === "sandbox-agent")?.internalDependencies, [
      "@sandbox-agent/session-store",
      "acp-http-client",
    ]);
  });

  it("installs one tarball alone: its internal dependencies come from the sibling tarballs", async () => {
    // ai-acp → ai-sandbox → sandbox-agent → acp-http-client (and session-store): the longest internal chain.
    await npm("install ai-acp", ["install", tarball("@sandbox-agent/ai-acp")]);
    const lock = JSON.parse(await readFile(path.join(app, "package-lock.json"), "utf8")) as {
      packages: Record<string, { resolved?: string }>;
    };
    for (const name of [
      "@sandbox-agent/ai-sandbox",
      "sandbox-agent",
      "acp-http-client",
      "@sandbox-agent/session-store",
    ]) {
      const resolved = lock.packages[`node_modules/${name}`]?.resolved ?? "";
      assert.match(resolved, /^file:.*\.tgz$/, `${name} came from a tarball, not the registry: ${resolved}`);
    }
  });

  it("installs the other packages (the server and the mock agent among them) and @types/node beside them", async () => {
    const typesNode = createRequire(path.join(repoRoot, "package.json"))("@types/node/package.json") as {
      version: string;
    };
    const installed = [
      "@sandbox-agent/ai-acp",
      "@sandbox-agent/ai-sandbox",
      "sandbox-agent",
      "acp-http-client",
    ];
    const others = PUBLIC.filter((name) => !installed.includes(name));
    assert.ok(others.includes("@sandbox-agent/server") && others.includes("@sandbox-agent/mock-agent"));
    await npm("install others", ["install", ...others.map(tarball), `@types/node@${typesNode.version}`]);
    for (const name of PUBLIC) {
      const manifest = JSON.parse(
        await readFile(path.join(app, "node_modules", name, "package.json"), "utf8"),
      ) as {
        version: string;
      };
      assert.ok(manifest.version, `${name} is installed`);
    }
  });

  it("ships a LICENSE, repository links, everything its files list, and the sources every source map names", async () => {
    const license = await readFile(path.join(repoRoot, "LICENSE"), "utf8");
    for (const name of PUBLIC) {
      const dir = path.join(app, "node_modules", name);
      assert.equal(await readFile(path.join(dir, "LICENSE"), "utf8"), license, `${name} LICENSE`);
      const manifest = JSON.parse(await readFile(path.join(dir, "package.json"), "utf8")) as Manifest & {
        repository?: { url?: string };
        homepage?: string;
        bugs?: { url?: string };
      };
      assert.match(manifest.repository?.url ?? "", /^git\+https:\/\//, `${name} repository`);
      assert.ok(manifest.homepage, `${name} homepage`);
      assert.ok(manifest.bugs?.url, `${name} bugs`);
      for (const bin of Object.values(manifest.bin ?? {})) await readFile(path.join(dir, bin));
      for (const entry of manifest.files ?? []) await stat(path.join(dir, entry));
      const exported = manifest.exports?.["."] as Record<string, string> | undefined;
      if (exported !== undefined) {
        assert.ok(exported.default, `${name} has a default export condition (require() needs one)`);
        assert.ok(manifest.exports?.["./package.json"], `${name} exports its package.json`);
      }
      if (!(manifest.files ?? []).includes("dist/src")) continue;
      const maps = (await readdir(path.join(dir, "dist/src"), { recursive: true })).filter((f) =>
        f.endsWith(".map"),
      );
      assert.ok(maps.length > 0, `${name} has source maps`);
      for (const map of maps) {
        const file = path.join(dir, "dist/src", map);
        const { sources } = JSON.parse(await readFile(file, "utf8")) as { sources: string[] };
        for (const source of sources) await readFile(path.resolve(path.dirname(file), source));
      }
    }
  });

  it("runs a chat() turn from an ES module", async () => {
    const result = await mustRun(process.execPath, ["esm-turn.mjs"], {
      cwd: app,
      env,
      timeoutMs: RUN_TIMEOUT_MS,
    });
    timings.esm = result.durationMs;
    assert.deepEqual(lastJsonLine<Turn>(result.stdout), { text: "hello from esm", stopReason: "end_turn" });
  });

  it("require()s every package and runs an SDK turn from CommonJS", async () => {
    const importable = IMPORTABLE.map((manifest) => manifest.name);
    const result = await mustRun(process.execPath, ["cjs-turn.cjs", ...importable], {
      cwd: app,
      env,
      timeoutMs: RUN_TIMEOUT_MS,
    });
    timings.cjs = result.durationMs;
    const turn = lastJsonLine<Turn & { exportCounts: Record<string, number> }>(result.stdout);
    assert.deepEqual(
      { text: turn.text, stopReason: turn.stopReason },
      { text: "hello from cjs", stopReason: "end_turn" },
    );
    assert.deepEqual(Object.keys(turn.exportCounts).sort(), [...importable].sort());
    for (const [name, count] of Object.entries(turn.exportCounts)) assert.ok(count > 0, `${name} exports`);
  });

  it("compiles TypeScript against the installed types without the DOM lib, and runs it", async () => {
    const started = Date.now();
    // Every public package's declarations are part of the program, so all of them are checked.
    await writeFile(
      path.join(app, "public-packages.mts"),
      IMPORTABLE.filter((manifest) => manifest.types !== undefined)
        .map((manifest, i) => `export type * as p${i} from "${manifest.name}";\n`)
        .join(""),
    );
    // Our declaration files are checked (skipLibCheck: false for them), third-party ones are not.
    const ours = new RegExp(`/node_modules/(${PUBLIC.join("|")})/`);
    const compiled = typeCheckAndEmit(path.join(app, "tsconfig.json"), (file) => ours.test(file));
    timings.tsc = Date.now() - started;
    assert.equal(compiled.errors, "");
    assert.ok(compiled.checked > PUBLIC.length, `checked ${compiled.checked} files`);
    const result = await mustRun(process.execPath, ["out/ts-turn.mjs"], {
      cwd: app,
      env,
      timeoutMs: RUN_TIMEOUT_MS,
    });
    timings.ts = result.durationMs;
    const turn = lastJsonLine<Turn>(result.stdout);
    assert.deepEqual(
      { text: turn.text, stopReason: turn.stopReason },
      { text: "hello from typescript", stopReason: "end_turn" },
    );
  });
});
