#!/usr/bin/env node
// Builds the self-contained server: one directory that runs with a plain `node` >= 20 and no
// node_modules (for container images and "copy into a running sandbox"):
//   bundle/sandbox-agent.mjs   the CLI (`node sandbox-agent.mjs server ...`)
//   bundle/mock-agent.mjs      the built-in `mock` agent, found by the server beside itself
//   bundle/chunk-*.mjs         one start chunk (what the entry shares with code loaded later), and
//                              code loaded on first use (zod, control plane, extensions, MCP client)
//   bundle/ui/                 the inspector page (`@sandbox-agent/inspector`'s build), served at /ui/
// esbuild-wasm is esbuild compiled to WebAssembly: a plain npm package, no prebuilt native binary
// downloaded or selected at install time.
//   node scripts/bundle.mjs [--out DIR] [--json] [--if-stale]
// --if-stale: do not rebundle the code when the bundle is newer than every compiled file it is
// made from; then refresh its stamp (bundle/VERSION), which tells bin/sandbox-agent.js that the
// bundle is current (a compile that changed only tests rewrites the .tsbuildinfo it compares
// with). The inspector page is a copy, compared by content on every run (its build rewrites
// every file, so modification times would make the bundle look stale after each `npm run build`).
import { createHash } from "node:crypto";
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import * as esbuild from "esbuild-wasm";

const { values } = parseArgs({
  options: {
    out: { type: "string" },
    json: { type: "boolean" },
    "if-stale": { type: "boolean" },
    help: { type: "boolean", short: "h" },
  },
});
if (values.help) {
  process.stdout.write("Usage: node scripts/bundle.mjs [--out DIR] [--json] [--if-stale]\n");
  process.exit(0);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const pkgDir = path.resolve(here, "..");
const outdir = path.resolve(values.out ?? path.join(pkgDir, "bundle"));
const { version } = JSON.parse(readFileSync(path.join(pkgDir, "package.json"), "utf8"));
// Both entries are bundled from the compiled output (`tsc -b` runs first, see package.json).
const mockMain = path.join(
  path.dirname(fileURLToPath(import.meta.resolve("@sandbox-agent/mock-agent"))),
  "main.js",
);

const mockDir = `${path.dirname(mockMain)}${path.sep}`;

/** Newest modification time of the files under `dir` (0 when it does not exist). */
function newest(dir) {
  try {
    return Math.max(
      0,
      ...readdirSync(dir, { recursive: true, withFileTypes: true })
        .filter((entry) => entry.isFile())
        .map((entry) => statSync(path.join(entry.parentPath, entry.name)).mtimeMs),
    );
  } catch {
    return 0;
  }
}

/** The inspector's build (`npm run build -w @sandbox-agent/inspector`), which the bundle serves at /ui/. */
function inspectorBuild() {
  let dir;
  try {
    dir = path.dirname(fileURLToPath(import.meta.resolve("@sandbox-agent/inspector/ui/index.html")));
  } catch {
    dir = undefined;
  }
  if (dir === undefined || !existsSync(path.join(dir, "index.html"))) {
    process.stderr.write(
      "bundle: the inspector page is not built: run `npm run build -w @sandbox-agent/inspector` " +
        "(the root `npm run build` builds it before bundling)\n",
    );
    process.exit(1);
  }
  return dir;
}

/** A digest of every file under `dir` (names and contents), or "" when it does not exist. */
function treeDigest(dir) {
  if (!existsSync(dir)) return "";
  const hash = createHash("sha256");
  const files = readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((name) => statSync(path.join(dir, name)).isFile())
    .sort();
  for (const name of files)
    hash
      .update(`${name}\0`)
      .update(readFileSync(path.join(dir, name)))
      .update("\0");
  return hash.digest("hex");
}

/** Makes `outdir/ui` a copy of the inspector build; true when it changed. */
function syncInspector(from) {
  const to = path.join(outdir, "ui");
  if (treeDigest(to) === treeDigest(from)) return false;
  rmSync(to, { recursive: true, force: true });
  cpSync(from, to, { recursive: true });
  return true;
}

const inspectorDir = inspectorBuild();
const sources = [path.join(pkgDir, "dist/src"), path.dirname(mockMain), here];
const stamp = path.join(outdir, "VERSION");
if (
  values["if-stale"] &&
  newest(outdir) > 0 &&
  statSync(stamp, { throwIfNoEntry: false })?.mtimeMs > Math.max(...sources.map(newest))
) {
  const what = syncInspector(inspectorDir) ? "inspector page updated" : "up to date";
  const now = new Date();
  utimesSync(stamp, now, now);
  process.stdout.write(
    `server bundle ${version}: ${what} in ${path.relative(process.cwd(), outdir) || "."}\n`,
  );
  process.exit(0);
}

/**
 * Defines `require` in an ES module output file (esbuild's require shim calls it). The CommonJS
 * loader behind it is made on the first call: `createRequire` builds a module object and resolves
 * its node_modules paths, ~1 ms of the start path (bench/README.md, Start path), and built-ins,
 * the usual thing required, come from `process.getBuiltinModule` without it. `node:module` comes
 * from there too (an `import` of it before Node 20.16).
 */
const REQUIRE_BANNER =
  'const __m=process.getBuiltinModule?.("node:module")??await import("node:module");let __r;' +
  "function require(id){return process.getBuiltinModule?.(id)??(__r??=__m.createRequire(import.meta.url))(id)}";

/**
 * Drops the `require` banner from the output files that never use `require`: every createRequire
 * builds a CommonJS module object and resolves its node_modules paths, which for ~15 start-up
 * chunks is a good part of the path work that makes V8 optimise path's normaliser during start-up
 * (~3.5 MB of resident memory, bench/README.md). A file that mentions `require` other than as a
 * word of prose (followed by a space and a letter, as in the CLI's help) keeps it.
 */
function dropUnusedRequireBanners() {
  for (const name of readdirSync(outdir).filter((n) => n.endsWith(".mjs"))) {
    const file = path.join(outdir, name);
    const text = readFileSync(file, "utf8");
    const rest = text.replace(REQUIRE_BANNER, "");
    if (rest !== text && !/\brequire\b(?! [A-Za-z])/.test(rest)) writeFileSync(file, rest);
  }
}

/** The namespace of the modules `builtinsWithoutFacades` makes (a metafile key is `builtin:node:fs`). */
const BUILTIN = "builtin";

/**
 * Imports of Node built-ins (`import { spawn } from "node:child_process"`) become reads of the
 * built-in's own object (`process.getBuiltinModule`, Node 20.16+; `require` before), not ES module
 * imports: Node makes an ES module facade for each built-in imported, links it and reads every
 * export, which also runs lazy getters (`util.MIMEType` loads `internal/mime`). Each built-in
 * becomes a module of the bundle exporting the object as `default` and each name as a constant,
 * read once and only if some module imports it (`@__PURE__`, so esbuild drops the others). Not
 * CommonJS: esbuild would copy every property into a new object for each importing module.
 */
function builtinsWithoutFacades() {
  return {
    name: "builtins-without-facades",
    setup(build) {
      // Not in the mock agent (its own process): modules it shared with the server would make a
      // chunk of their own, one more file on the server's start path.
      build.onResolve({ filter: /^node:/ }, (args) =>
        args.kind === "import-statement" && !args.importer.startsWith(mockDir)
          ? { path: args.path, namespace: BUILTIN }
          : undefined,
      );
      build.onLoad({ filter: /.*/, namespace: BUILTIN }, async (args) => {
        const id = JSON.stringify(args.path);
        const names = Object.keys(await import(args.path)).filter(
          (name) => /^[A-Za-z_$][\w$]*$/.test(name) && name !== "default",
        );
        return {
          contents: [
            `const m = process.getBuiltinModule?.(${id}) ?? require(${id});`,
            "export default m;",
            ...names.map((name) => `export const ${name} = /* @__PURE__ */ (() => m.${name})();`),
          ].join("\n"),
          loader: "js",
        };
      });
    },
  };
}

/** Absolute path of a metafile key (they are relative to the working directory); a built-in's id. */
const fromMeta = (key) => (key.startsWith(`${BUILTIN}:`) ? key.slice(BUILTIN.length + 1) : path.resolve(key));

/**
 * From a metafile: the source modules that load when the server starts (those of every output file
 * the server entry imports statically, transitively, except the entry's own module) and the
 * modules the server imports dynamically (the entries of its lazily loaded chunks).
 */
function startGraph(metafile) {
  const outputs = new Map(Object.entries(metafile.outputs).map(([key, out]) => [fromMeta(key), out]));
  const walk = (from, kinds) => {
    const seen = new Set();
    const queue = [from];
    while (queue.length > 0) {
      const file = queue.pop();
      if (seen.has(file)) continue;
      seen.add(file);
      for (const imported of outputs.get(file).imports)
        if (!imported.external && kinds.includes(imported.kind)) queue.push(fromMeta(imported.path));
    }
    return [...seen].map((file) => outputs.get(file));
  };
  const entry = path.join(outdir, "sandbox-agent.mjs");
  const startModules = walk(entry, ["import-statement"])
    .flatMap((out) => Object.keys(out.inputs).map(fromMeta))
    .filter((file) => file !== serverEntry);
  const lazyEntries = walk(entry, ["import-statement", "dynamic-import"])
    .map((out) => out.entryPoint)
    .filter((input) => input !== undefined)
    .map(fromMeta)
    .filter((file) => file !== serverEntry);
  return { startModules: [...new Set(startModules)], lazyEntries: new Set(lazyEntries) };
}

/** The esbuild plugin of the second pass (see where it is used). */
function oneStartChunk({ startModules, lazyEntries }) {
  const imports = startModules.map((file) => `import ${JSON.stringify(file)};`).join("\n");
  return {
    name: "one-start-chunk",
    setup(build) {
      build.onResolve({ filter: /^sandbox-agent:start-modules$/ }, () => ({
        path: "start-modules",
        namespace: "sandbox-agent",
      }));
      build.onLoad({ filter: /.*/, namespace: "sandbox-agent" }, () => ({
        contents: imports,
        loader: "js",
        resolveDir: pkgDir,
      }));
      build.onLoad({ filter: /\.js$/ }, (args) =>
        lazyEntries.has(args.path)
          ? {
              contents: `import "sandbox-agent:start-modules";\n${readFileSync(args.path, "utf8")}`,
              loader: "js",
            }
          : undefined,
      );
    },
  };
}

const started = performance.now();
rmSync(outdir, { recursive: true, force: true });
mkdirSync(outdir, { recursive: true });
const serverEntry = path.join(pkgDir, "dist/src/cli.js");
/** @type {import("esbuild-wasm").BuildOptions} */
const options = {
  entryPoints: [
    { in: serverEntry, out: "sandbox-agent" },
    { in: mockMain, out: "mock-agent" },
  ],
  outdir,
  bundle: true,
  // Dynamic imports stay dynamic: zod, the control plane and the extensions load on first use,
  // as they do unbundled (start-up time and idle memory).
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  outExtension: { ".js": ".mjs" },
  chunkNames: "chunk-[hash]",
  minify: true,
  legalComments: "none",
  metafile: true,
  logLevel: "warning",
  define: {
    SANDBOX_AGENT_BUNDLED_VERSION: JSON.stringify(version),
    SANDBOX_AGENT_BUNDLED_MOCK: JSON.stringify("./mock-agent.mjs"),
    SANDBOX_AGENT_BUNDLED_UI: JSON.stringify("./ui/"),
  },
  // CommonJS dependencies (the MCP SDK's stdio client) call require() for Node built-ins.
  banner: { js: REQUIRE_BANNER },
  plugins: [builtinsWithoutFacades()],
};
// Two passes. esbuild puts a module shared by the entry and some lazily imported modules in a
// chunk per distinct set of importers: ~13 small chunks on the start path, each one more module
// for Node's loader to resolve (realpath, file URL) and link at start-up. The first pass finds the
// start path's modules and the lazily imported entries; the second makes every lazy entry import
// all start-path modules (already evaluated by then, so nothing runs twice or in another order),
// which gives them one set of importers and so one chunk: the entry and one start chunk.
const firstPass = await esbuild.build({ ...options, write: false, logLevel: "error" });
const result = await esbuild.build({
  ...options,
  plugins: [...options.plugins, oneStartChunk(startGraph(firstPass.metafile))],
});
dropUnusedRequireBanners();
const entry = path.join(outdir, "sandbox-agent.mjs");
writeFileSync(entry, `#!/usr/bin/env node\n${readFileSync(entry, "utf8")}`);
chmodSync(entry, 0o755);
writeFileSync(path.join(outdir, "VERSION"), `${version}\n`);
syncInspector(inspectorDir);

const files = readdirSync(outdir, { recursive: true, encoding: "utf8" })
  .filter((name) => statSync(path.join(outdir, name)).isFile())
  .map((name) => ({ name, bytes: statSync(path.join(outdir, name)).size }));
const total = files.reduce((sum, f) => sum + f.bytes, 0);
const summary = {
  outdir,
  version,
  files: files.length,
  bytes: total,
  ms: Math.round(performance.now() - started),
};
if (values.json) process.stdout.write(`${JSON.stringify({ ...summary, fileList: files })}\n`);
else
  process.stdout.write(
    `server bundle ${version}: ${files.length} files, ${(total / 1024).toFixed(0)} KiB in ${path.relative(process.cwd(), outdir) || "."} (${summary.ms} ms)\n`,
  );
void result;
