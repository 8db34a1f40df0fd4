import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { pack } from "tar-stream";

/** Where the provider puts the server inside the container. */
export const SERVER_HOME = "/opt/sandbox-agent";
export const TOKEN_FILE = `${SERVER_HOME}/token`;
export const STATE_DIR = `${SERVER_HOME}/state`;
export const DATA_DIR = `${SERVER_HOME}/data`;
export const LAUNCHER = `${SERVER_HOME}/start.mjs`;

/**
 * The container's main process. It refuses a Node.js that is too old with a message of its own
 * (exit 3), reads the token the provider wrote for this start, and runs the bundled CLI. The token
 * reaches the server through its environment, so it never appears in the container's config.
 */
const LAUNCHER_SOURCE = `import { readFileSync } from "node:fs";
const major = Number(process.versions.node.split(".")[0]);
if (major < 20) {
  process.stderr.write("sandbox-agent: node " + process.version + " is too old: the server needs Node.js >= 20\\n");
  process.exit(3);
}
process.env.SANDBOX_AGENT_TOKEN = readFileSync(new URL("./token", import.meta.url), "utf8").trim();
await import("./server/sandbox-agent.mjs");
`;

/** The bundled server of `@sandbox-agent/server` (`npm run bundle -w @sandbox-agent/server`). */
export function defaultBundleDir(): string {
  try {
    return path.dirname(fileURLToPath(import.meta.resolve("@sandbox-agent/server/bundle/sandbox-agent.mjs")));
  } catch {
    return "";
  }
}

interface BundleFile {
  /** Path relative to the bundle directory, `/`-separated. */
  name: string;
  data: Buffer;
}

const cache = new Map<string, BundleFile[]>();

function readBundle(dir: string): BundleFile[] {
  const cached = cache.get(dir);
  if (cached !== undefined) return cached;
  if (dir === "" || !existsSync(path.join(dir, "sandbox-agent.mjs"))) {
    throw new Error(
      `dockerSandbox: no server bundle${dir === "" ? "" : ` in ${dir}`}: build it with ` +
        "`npm run bundle -w @sandbox-agent/server`, or pass dockerSandbox({ serverBundle: DIR })",
    );
  }
  // The code files, and the inspector page in ui/ (served at /ui/ by the server inside).
  const files = readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((name) => statSync(path.join(dir, name)).isFile())
    .sort()
    .map((name) => ({ name: name.split(path.sep).join("/"), data: readFileSync(path.join(dir, name)) }));
  cache.set(dir, files);
  return files;
}

/** Every directory that holds a file of `files`, parents first. */
function directoriesOf(files: BundleFile[]): string[] {
  const dirs = new Set<string>();
  for (const { name } of files) {
    for (let dir = path.posix.dirname(name); dir !== "."; dir = path.posix.dirname(dir)) dirs.add(dir);
  }
  return [...dirs].sort();
}

/** A tar (rooted at `/`) holding the server, its launcher and this start's token. */
export async function serverArchive(dir: string, token: string): Promise<Buffer> {
  const files = readBundle(dir);
  const tar = pack();
  const home = SERVER_HOME.slice(1);
  const add = (name: string, data: string | Buffer, mode = 0o644) =>
    tar.entry({ name: `${home}/${name}`, mode, uid: 0, gid: 0 }, data);
  const dirs = ["", "server", "state", "data", ...directoriesOf(files).map((dir) => `server/${dir}`)];
  for (const dirName of dirs)
    tar.entry({ name: `${home}/${dirName}`, type: "directory", mode: 0o755, uid: 0, gid: 0 });
  for (const file of files) add(`server/${file.name}`, file.data, file.name.endsWith(".mjs") ? 0o755 : 0o644);
  add("start.mjs", LAUNCHER_SOURCE);
  // Readable by the image's user whoever it is: processes in the container can reach the
  // server anyway, the token keeps out the rest of this machine.
  add("token", `${token}\n`);
  return tarBuffer(tar);
}

/** A tar holding only a fresh token (a stopped sandbox restarts with a new one). */
export async function tokenArchive(token: string): Promise<Buffer> {
  const tar = pack();
  tar.entry({ name: TOKEN_FILE.slice(1), mode: 0o644, uid: 0, gid: 0 }, `${token}\n`);
  return tarBuffer(tar);
}

async function tarBuffer(tar: ReturnType<typeof pack>): Promise<Buffer> {
  tar.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of tar as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks);
}
