import { readdirSync, readFileSync } from "node:fs";

/** PIDs of live processes whose command line contains `marker` (zombies excluded). */
export function processesWith(marker: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8");
      if (!cmdline.includes(marker)) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2)[0] === "Z") continue;
      pids.push(Number(entry));
    } catch {
      // process went away while we looked
    }
  }
  return pids;
}
