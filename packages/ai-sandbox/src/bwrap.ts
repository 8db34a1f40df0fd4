// Isolation for the local-process provider with bubblewrap (`bwrap`): every command gets a fresh
// mount namespace holding only the system directories (read-only), a few files of /etc and the
// sandbox's own directories (read-write), inside its own user, PID, IPC and cgroup namespaces.
// Paths are the same inside as outside, so file paths in the agent's tool calls mean the same on
// the host.
import { spawn } from "node:child_process";
import { accessSync, constants, existsSync, lstatSync, readFileSync, readlinkSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { userInfo } from "node:os";
import { delimiter, isAbsolute, join, resolve } from "node:path";

export interface BwrapOptions {
  /** Keep the host's network (default). `false`: a network namespace of its own, with only loopback. */
  network?: boolean;
  /** Host paths mounted read-only at the same path (e.g. an agent CLI installed outside `/usr`). */
  readOnly?: readonly string[];
  /** Host paths mounted read-write at the same path. */
  readWrite?: readonly string[];
}

/** The sandbox's own directories (absolute host paths, mounted read-write at the same path). */
export interface BwrapLayout {
  /** Where the generated `passwd`/`group` are kept (not mounted itself). */
  etcDir: string;
  home: string;
  writable: readonly string[];
}

/**
 * Files of /etc that programs read at run time: name resolution (`resolv.conf`, `hosts`,
 * `nsswitch.conf`, `gai.conf`, `services`, `protocols`), CA certificates (git and curl read them;
 * Node has its own bundle), the dynamic loader's cache, the time zone, Debian's `alternatives`
 * (`/usr/bin/awk` is a link into it) and `os-release`. Mounted when present; each mount costs
 * spawn time, so configuration only tools like `ldconfig` read stays out. `passwd`/`group` are
 * generated instead; `shadow`, `ssh/`, `sudoers`, the system `gitconfig` and the rest stay out.
 */
const ETC_FILES = [
  "resolv.conf",
  "hosts",
  "nsswitch.conf",
  "gai.conf",
  "services",
  "protocols",
  "ssl",
  "pki",
  "crypto-policies",
  "ld.so.cache",
  "localtime",
  "alternatives",
  "os-release",
];

/** Top-level system directories: bound read-only, or recreated as the symlinks they are on merged-/usr hosts. */
const SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

const INSTALL_HINT =
  "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`, Fedora: `dnf install bubblewrap`, " +
  'Arch: `pacman -S bubblewrap`) or drop `isolate: "bwrap"` to run without isolation';

/** Finds `bwrap` on the host's PATH. */
function findBwrap(): string {
  for (const dir of (process.env["PATH"] ?? "").split(delimiter)) {
    if (dir === "") continue;
    const candidate = join(dir, "bwrap");
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not here.
    }
  }
  throw new Error(`isolate: "bwrap": bubblewrap (bwrap) is not installed or not on PATH: ${INSTALL_HINT}.`);
}

function systemMounts(): string[] {
  const args: string[] = [];
  for (const dir of SYSTEM_DIRS) {
    const stat = lstatSync(dir, { throwIfNoEntry: false });
    if (stat?.isSymbolicLink()) args.push("--symlink", readlinkSync(dir), dir);
    else if (stat?.isDirectory()) args.push("--ro-bind", dir, dir);
  }
  args.push("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", "/var");
  args.push("--symlink", "../tmp", "/var/tmp", "--symlink", "../proc/self/mounts", "/etc/mtab");
  for (const name of ETC_FILES) args.push("--ro-bind-try", `/etc/${name}`, `/etc/${name}`);
  return args;
}

/** The name of group `gid` in the host's /etc/group, if listed. */
function groupName(gid: number): string | undefined {
  try {
    const line = readFileSync("/etc/group", "utf8")
      .split("\n")
      .find((entry) => entry.split(":")[2] === String(gid));
    return line?.split(":")[0];
  } catch {
    return undefined;
  }
}

/**
 * `passwd` and `group` naming only the sandbox user (with the sandbox HOME), root and nobody:
 * `whoami`, git and ssh want an entry for the current uid, and nothing more of the host's user
 * list is needed. Unmapped ids show as nobody (65534) inside the user namespace.
 */
async function writeIdentity(etcDir: string, home: string): Promise<void> {
  const uid = process.getuid?.() ?? 0;
  const gid = process.getgid?.() ?? 0;
  let user = "sandbox";
  try {
    user = userInfo().username;
  } catch {
    // A uid without a passwd entry (containers with arbitrary uids).
  }
  const group = groupName(gid) ?? user;
  const passwd = [`${user}:x:${uid}:${gid}:${user}:${home}:/bin/sh`];
  const groups = [`${group}:x:${gid}:`];
  if (uid !== 0) passwd.push("root:x:0:0:root:/root:/usr/sbin/nologin");
  if (gid !== 0) groups.push("root:x:0:");
  passwd.push("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin");
  groups.push("nogroup:x:65534:");
  await mkdir(etcDir, { recursive: true });
  await writeFile(join(etcDir, "passwd"), `${passwd.join("\n")}\n`);
  await writeFile(join(etcDir, "group"), `${groups.join("\n")}\n`);
}

function userPaths(kind: "home" | "readOnly" | "readWrite", paths: readonly string[] = []): string[] {
  return paths.map((path) => {
    if (!isAbsolute(path)) throw new TypeError(`isolate: "bwrap": ${kind} path "${path}" must be absolute`);
    if (!existsSync(path)) throw new Error(`isolate: "bwrap": ${kind} path "${path}" does not exist`);
    return resolve(path);
  });
}

/**
 * The bwrap command line (up to, not including, `--chdir` and the command) for one sandbox.
 * Order matters: later mounts cover earlier ones, so the sandbox directories stay writable even
 * inside a `readOnly` path, and the root is made read-only last.
 */
export async function bwrapLauncher(layout: BwrapLayout, options: BwrapOptions): Promise<string[]> {
  const bwrap = findBwrap();
  const readOnly = userPaths("readOnly", options.readOnly);
  const readWrite = userPaths("readWrite", options.readWrite);
  userPaths("home", [layout.home]);
  await writeIdentity(layout.etcDir, layout.home);
  const args = [
    bwrap,
    // Root runs bwrap with every capability kept unless told; in a user namespace of its own
    // without capabilities it cannot remount /usr read-write.
    "--unshare-user",
    "--cap-drop",
    "ALL",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-cgroup-try",
    ...(options.network === false ? ["--unshare-net"] : []),
    "--die-with-parent",
    ...systemMounts(),
    "--ro-bind",
    join(layout.etcDir, "passwd"),
    "/etc/passwd",
    "--ro-bind",
    join(layout.etcDir, "group"),
    "/etc/group",
    ...readOnly.flatMap((path) => ["--ro-bind", path, path]),
    ...readWrite.flatMap((path) => ["--bind", path, path]),
    ...layout.writable.flatMap((path) => ["--bind", path, path]),
    "--remount-ro",
    "/",
  ];
  await probe(args, layout.writable[0] ?? "/");
  return args;
}

/** Starts `true` the way every command will be started, so a broken setup fails `create`, clearly. */
async function probe(args: readonly string[], cwd: string): Promise<void> {
  const [file, ...rest] = args as [string, ...string[]];
  const child = spawn(file, [...rest, "--chdir", cwd, "--", "/bin/sh", "-c", "exit 0"], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { PATH: process.env["PATH"] ?? "" },
  });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const code = await new Promise<number | null>((done, fail) => {
    child.once("error", (error) =>
      fail(new Error(`isolate: "bwrap": cannot run ${file}: ${error.message}; ${INSTALL_HINT}`)),
    );
    child.once("close", done);
  });
  if (code === 0) return;
  const said = stderr.trim() || `exit code ${code}`;
  if (/namespace|[ug]id map|setgroups|RTM_NEWADDR|mount proc/i.test(said))
    throw new Error(
      `isolate: "bwrap": bubblewrap cannot create user namespaces here (${said}). ${usernsHint()}`,
    );
  throw new Error(`isolate: "bwrap": bubblewrap failed to start the sandbox: ${said}`);
}

function readSysctl(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8").trim();
  } catch {
    return undefined;
  }
}

/** What to change, read from the sysctls that disable unprivileged user namespaces. */
function usernsHint(): string {
  const hints: string[] = [];
  if (readSysctl("/proc/sys/user/max_user_namespaces") === "0")
    hints.push("`sysctl -w user.max_user_namespaces=15000` (it is 0)");
  if (readSysctl("/proc/sys/kernel/unprivileged_userns_clone") === "0")
    hints.push("`sysctl -w kernel.unprivileged_userns_clone=1`");
  if (readSysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") === "1")
    hints.push(
      "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (or an AppArmor profile that allows userns for bwrap)",
    );
  const fix =
    hints.length > 0
      ? `Enable unprivileged user namespaces: ${hints.join("; ")}.`
      : "Unprivileged user namespaces are unavailable: check `user.max_user_namespaces`, " +
        "`kernel.unprivileged_userns_clone` (Debian) and `kernel.apparmor_restrict_unprivileged_userns` " +
        "(Ubuntu), or, inside a container, a seccomp profile that blocks unshare.";
  return `${fix} Or drop \`isolate: "bwrap"\` to run without isolation.`;
}
