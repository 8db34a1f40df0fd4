import { spawn, type ChildProcess } from "node:child_process";
import type { Logger } from "../log.js";

/**
 * The watcher: it learns agents' process groups from its stdin (`+PGID`, `-PGID`) and, when the
 * stdin reaches EOF without a `done` line (the server died without stopping its agents: SIGKILL,
 * the OOM killer, a crash in native code), sends SIGTERM to every group it still knows, then
 * SIGKILL `$1` seconds later. It ignores the signals a terminal or supervisor sends the server's
 * group, and lives in a session of its own. Builtins only (dash, bash, busybox), except `sleep`.
 * dash's `kill` takes no `--`, so a group is written `-PGID` right after the signal.
 */
const WATCHER = `trap '' INT TERM HUP
groups=" "
while IFS= read -r line; do
  case $line in
    +*) groups="$groups\${line#+} " ;;
    -*) id=\${line#-}; case $groups in *" $id "*) groups="\${groups%%" $id "*} \${groups#*" $id "}" ;; esac ;;
    done) exit 0 ;;
  esac
done
[ "$groups" = " " ] && exit 0
for g in $groups; do kill -TERM "-$g" 2>/dev/null; done
sleep "$1"
for g in $groups; do kill -KILL "-$g" 2>/dev/null; done
`;

/**
 * Makes agents die with the server even when it is killed outright. An agent that ignores stdin
 * EOF would otherwise outlive a SIGKILLed server forever.
 *
 * Why a watcher process: `prctl(PR_SET_PDEATHSIG)` needs native code or a launcher such as
 * util-linux's `setpriv --pdeathsig` (an extra exec per spawn, +2.5–3 ms measured; absent from
 * minimal images such as distroless), and it covers only the agent itself, not the helpers in its
 * process group. One `/bin/sh` per server (~1.7 MB RSS, started with the first agent) covers whole
 * groups for a pipe write per spawn (~6 µs). Without `/bin/sh`, or if the watcher is killed along
 * with the server, agents that ignore EOF still survive a SIGKILL: the server logs the first case.
 */
export class OrphanGuard {
  private watcher: ChildProcess | undefined;
  private unavailable = false;
  private readonly groups = new Set<number>();

  constructor(
    private readonly graceMs: number,
    private readonly logger: Logger,
    private readonly shell = "/bin/sh",
  ) {}

  /** Starts watching an agent's process group (its leader's pid). */
  add(pgid: number): void {
    const stdin = this.start()?.stdin; // a new watcher learns the groups known so far
    this.groups.add(pgid);
    if (stdin?.writable) stdin.write(`+${pgid}\n`);
  }

  /** Stops watching a group whose agent is gone. */
  remove(pgid: number): void {
    const stdin = this.watcher?.stdin;
    if (this.groups.delete(pgid) && stdin?.writable) stdin.write(`-${pgid}\n`);
  }

  /** Clean shutdown: every agent is stopped, the watcher may go without killing anything. */
  close(): void {
    this.watcher?.stdin?.end("done\n");
    this.watcher = undefined;
    this.unavailable = true;
  }

  private start(): ChildProcess | undefined {
    if (this.watcher || this.unavailable) return this.watcher;
    let watcher: ChildProcess;
    try {
      watcher = spawn(this.shell, ["-c", WATCHER, "orphan-guard", String(this.graceMs / 1000)], {
        stdio: ["pipe", "ignore", "ignore"],
        detached: true,
      });
    } catch (error) {
      return this.fail(error);
    }
    watcher.on("error", (error) => this.fail(error));
    watcher.stdin?.on("error", () => {}); // reported through "exit"
    watcher.once("exit", (code, signal) => {
      if (this.watcher !== watcher) return;
      this.watcher = undefined;
      this.logger.warn("orphan guard exited; restarting it with the next agent", { code, signal });
    });
    if (!watcher.stdin) return this.fail(new Error("no stdin pipe"));
    // It must not keep the server's event loop alive, nor die with it: its job starts when the server is gone.
    watcher.unref();
    (watcher.stdin as { unref?: () => void }).unref?.();
    this.watcher = watcher;
    // A restarted watcher learns every group still alive.
    for (const pgid of this.groups) watcher.stdin.write(`+${pgid}\n`);
    return watcher;
  }

  private fail(error: unknown): undefined {
    this.watcher = undefined;
    const code = (error as NodeJS.ErrnoException).code;
    // No shell at all: say so once. Anything else (EMFILE…) may pass: the next agent tries again.
    if (code === "ENOENT" || code === "EACCES") {
      this.unavailable = true;
      this.logger.warn(
        `no ${this.shell} for the orphan guard: agents that ignore stdin EOF may outlive a killed server`,
        {
          error: String(error),
        },
      );
    } else this.logger.warn("cannot start the orphan guard", { error: String(error) });
    return undefined;
  }
}
