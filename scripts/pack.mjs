#!/usr/bin/env node
// Packs every public workspace package into one directory, so they can be installed from this
// repository before they are published. Inside each tarball, dependencies on other packages of
// this repository point at the sibling tarball (`file:./<name>-<version>.tgz`): npm resolves such
// a path relative to the tarball that declares it, so installing any one tarball pulls in the
// others from the same directory, never from the registry (where packages with the same names
// but other contents may exist).
import { execFile } from "node:child_process";
import { cp, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs, promisify } from "node:util";

const run = promisify(execFile);
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const DEPENDENCY_FIELDS = ["dependencies", "optionalDependencies", "peerDependencies"];
const NPM_TIMEOUT_MS = 120_000;

const HELP = `Usage: node scripts/pack.mjs [--out DIR] [--no-build] [--json]

Packs the public packages of this repository into DIR (default: dist-packages/), with
dependencies between them rewritten to the sibling tarballs. Then, in your project:

  npm install <DIR>/sandbox-agent-<version>.tgz      # any one tarball; its siblings follow

Options:
  --out DIR     output directory (its old *.tgz files are removed first)
  --no-build    skip 'npm run build' (the packages must already be built)
  --json        print the result as JSON on stdout
  -h, --help    show this help
`;

/** @typedef {{ name: string, version: string, private?: boolean, [field: string]: unknown }} Manifest */
/** @typedef {{ name: string, version: string, dir: string, file: string, size: number, internalDependencies: string[] }} PackedPackage */

function fail(message) {
  process.stderr.write(`pack: ${message}\n`);
  process.exit(1);
}

function progress(message, quiet) {
  if (!quiet) process.stderr.write(`pack: ${message}\n`);
}

async function npm(args, cwd) {
  const { stdout } = await run("npm", args, { cwd, timeout: NPM_TIMEOUT_MS, maxBuffer: 64 * 1024 * 1024 });
  return stdout;
}

/** Workspace directories of the root package.json whose package is not private. */
async function publicWorkspaces() {
  const root = JSON.parse(await readFile(path.join(repoRoot, "package.json"), "utf8"));
  const all = [];
  for (const dir of root.workspaces ?? []) {
    /** @type {Manifest} */
    const manifest = JSON.parse(await readFile(path.join(repoRoot, dir, "package.json"), "utf8"));
    all.push({ dir, manifest });
  }
  return { all, public: all.filter((w) => !w.manifest.private) };
}

/** The tarball name npm gives a package: `@scope/name` → `scope-name-<version>.tgz`. */
function tarballName(manifest) {
  return `${manifest.name.replace(/^@/, "").replace("/", "-")}-${manifest.version}.tgz`;
}

/** The packed manifest: internal dependencies become sibling tarball paths. */
function rewriteManifest(manifest, workspaces) {
  const byName = new Map(workspaces.all.map((w) => [w.manifest.name, w.manifest]));
  const internal = [];
  const out = { ...manifest };
  for (const field of DEPENDENCY_FIELDS) {
    const deps = manifest[field];
    if (!deps) continue;
    out[field] = { ...deps };
    for (const name of Object.keys(deps)) {
      const target = byName.get(name);
      if (!target) continue;
      if (target.private) throw new Error(`${manifest.name} depends on the private package ${name}`);
      out[field][name] = `file:./${tarballName(target)}`;
      internal.push(name);
    }
  }
  return { manifest: out, internal };
}

async function removeOldTarballs(outDir) {
  await mkdir(outDir, { recursive: true });
  for (const entry of await readdir(outDir)) {
    if (entry.endsWith(".tgz")) await rm(path.join(outDir, entry));
  }
}

/**
 * @param {{ outDir: string, build?: boolean, quiet?: boolean }} options
 * @returns {Promise<PackedPackage[]>}
 */
export async function packAll({ outDir, build = true, quiet = false }) {
  const workspaces = await publicWorkspaces();
  if (build) {
    // The compiled packages, the inspector page and the server bundle: all of them are shipped.
    progress("building (npm run build)…", quiet);
    await run("npm", ["run", "build"], { cwd: repoRoot, timeout: 10 * 60_000 });
  }
  // npm pack leaves out a `files` entry that does not exist without a word: check them all.
  for (const { dir, manifest } of workspaces.public) {
    for (const entry of manifest.files ?? []) {
      const file = path.join(repoRoot, dir, entry);
      if (!(await stat(file).catch(() => undefined)))
        throw new Error(
          `${manifest.name} is not built (${path.relative(repoRoot, file)} is missing): run npm run build`,
        );
    }
  }
  progress(`packing ${workspaces.public.length} packages…`, quiet);
  // What npm would publish for each package: one dry run for all of them.
  const listed = JSON.parse(
    await npm(
      ["pack", "--dry-run", "--json", "--ignore-scripts", ...workspaces.public.flatMap((w) => ["-w", w.dir])],
      repoRoot,
    ),
  );
  const stage = await mkdtemp(path.join(tmpdir(), "sandbox-agent-pack-"));
  try {
    const staged = [];
    for (const { dir, manifest } of workspaces.public) {
      const files = listed.find((p) => p.name === manifest.name)?.files ?? [];
      const target = path.join(stage, tarballName(manifest).replace(/\.tgz$/, ""));
      for (const { path: file } of files) {
        await cp(path.join(repoRoot, dir, file), path.join(target, file), { recursive: false });
      }
      const rewritten = rewriteManifest(manifest, workspaces);
      await writeFile(path.join(target, "package.json"), JSON.stringify(rewritten.manifest, null, 2) + "\n");
      staged.push({ dir, manifest, target, internal: rewritten.internal });
    }
    await removeOldTarballs(outDir);
    const packed = JSON.parse(
      await npm(
        ["pack", "--json", "--ignore-scripts", "--pack-destination", outDir, ...staged.map((s) => s.target)],
        repoRoot,
      ),
    );
    return staged.map(({ dir, manifest, internal }) => {
      const result = packed.find((p) => p.name === manifest.name);
      if (!result) throw new Error(`npm pack did not report ${manifest.name}`);
      return {
        name: manifest.name,
        version: manifest.version,
        dir,
        file: path.join(outDir, result.filename),
        size: result.size,
        internalDependencies: internal,
      };
    });
  } finally {
    await rm(stage, { recursive: true, force: true });
  }
}

async function main() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        out: { type: "string" },
        "no-build": { type: "boolean" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
    }));
  } catch (error) {
    process.stderr.write(`pack: ${error.message}\n\n${HELP}`);
    process.exit(2);
  }
  if (values.help) return void process.stdout.write(HELP);
  const outDir = path.resolve(values.out ?? path.join(repoRoot, "dist-packages"));
  const packages = await packAll({ outDir, build: !values["no-build"], quiet: values.json }).catch((error) =>
    fail(error.message),
  );
  if (values.json) return void process.stdout.write(JSON.stringify(packages, null, 2) + "\n");
  for (const p of packages) {
    const deps = p.internalDependencies.length ? `  → ${p.internalDependencies.join(", ")}` : "";
    process.stdout.write(
      `${path.relative(process.cwd(), p.file)}  ${(p.size / 1024).toFixed(1)} KiB${deps}\n`,
    );
  }
  const sdk = packages.find((p) => p.name === "sandbox-agent") ?? packages[0];
  if (sdk) process.stdout.write(`\nInstall any of them into your project, e.g.\n  npm install ${sdk.file}\n`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
