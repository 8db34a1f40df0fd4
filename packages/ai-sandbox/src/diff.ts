import { createHash } from "node:crypto";
import { diffLines, splitLines, type LineEdit } from "./line-diff.js";
import type { SandboxInstance } from "./types.js";

const CONTEXT = 3;
const MAX_TEXT_BYTES = 1024 * 1024;
const READ_CONCURRENCY = 8;
const DEFAULT_EXCLUDE = [".git", "node_modules"];

export interface SnapshotEntry {
  sha256: string;
  /** Content, kept only for files up to 1 MiB. */
  data: Uint8Array | undefined;
}

/** File contents of a directory at one moment, keyed by `/`-separated path relative to it. */
export type FileSnapshot = ReadonlyMap<string, SnapshotEntry>;

export interface SnapshotOptions {
  /** Directory to snapshot, relative to the workdir or absolute. Default: the workdir. */
  dir?: string;
  /** Path segments to skip anywhere in the tree. Default `[".git", "node_modules"]`. */
  exclude?: readonly string[];
}

export interface FileDiff {
  path: string;
  type: "create" | "change" | "delete";
  /** Unified diff (git style, `a/` and `b/` prefixes). */
  diff: string;
}

/** Reads every file under `dir` through the instance's file API, so it works with any provider. */
export async function snapshotFiles(
  instance: SandboxInstance,
  options: SnapshotOptions = {},
): Promise<FileSnapshot> {
  const dir = options.dir ?? instance.workdir;
  const exclude = options.exclude ?? DEFAULT_EXCLUDE;
  const paths = (await instance.files.list(dir, { exclude }))
    .filter((e) => e.type === "file")
    .map((e) => e.path);
  const entries = new Map<string, SnapshotEntry>();
  // A few reads in flight: remote providers pay one round trip per file.
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < paths.length) {
      const path = paths[next++] as string;
      const data = await instance.files.readFile(`${dir}/${path}`);
      if (data === undefined) continue; // removed while listing
      const sha256 = createHash("sha256").update(data).digest("hex");
      entries.set(path, { sha256, data: data.byteLength <= MAX_TEXT_BYTES ? data : undefined });
    }
  };
  await Promise.all(Array.from({ length: READ_CONCURRENCY }, worker));
  return new Map(
    paths.flatMap((path) => (entries.has(path) ? [[path, entries.get(path) as SnapshotEntry]] : [])),
  );
}

/** Per-file unified diffs from `before` to `after`, sorted by path; new files and deletions included. */
export function diffSnapshots(before: FileSnapshot, after: FileSnapshot): FileDiff[] {
  const paths = [...new Set([...before.keys(), ...after.keys()])].sort();
  const out: FileDiff[] = [];
  for (const path of paths) {
    const a = before.get(path);
    const b = after.get(path);
    if (a?.sha256 === b?.sha256) continue;
    const type = a === undefined ? "create" : b === undefined ? "delete" : "change";
    out.push({ path, type, diff: fileDiff(path, type, a, b) });
  }
  return out;
}

function isBinary(entry: SnapshotEntry | undefined): boolean {
  if (entry === undefined) return false;
  if (entry.data === undefined) return true;
  return entry.data.subarray(0, 8000).includes(0);
}

function fileDiff(
  path: string,
  type: FileDiff["type"],
  a: SnapshotEntry | undefined,
  b: SnapshotEntry | undefined,
): string {
  const header = [`diff --git a/${path} b/${path}`];
  if (type === "create") header.push("new file mode 100644");
  if (type === "delete") header.push("deleted file mode 100644");
  const from = a === undefined ? "/dev/null" : `a/${path}`;
  const to = b === undefined ? "/dev/null" : `b/${path}`;
  if (isBinary(a) || isBinary(b)) return `${header.join("\n")}\nBinary files ${from} and ${to} differ\n`;
  const edits = diffLines(splitLines(text(a)), splitLines(text(b)));
  return `${header.join("\n")}\n--- ${from}\n+++ ${to}\n${hunks(edits).join("")}`;
}

function text(entry: SnapshotEntry | undefined): string {
  return entry?.data === undefined ? "" : Buffer.from(entry.data).toString("utf8");
}

/** Groups edits into hunks with CONTEXT lines around each change. */
function hunks(edits: readonly LineEdit[]): string[] {
  const out: string[] = [];
  let i = 0;
  const lineA = prefixCounts(edits, "+");
  const lineB = prefixCounts(edits, "-");
  while (i < edits.length) {
    while (i < edits.length && edits[i]?.op === " ") i++;
    if (i >= edits.length) break;
    const start = Math.max(0, i - CONTEXT);
    let end = i;
    // Extend while the next change is within 2*CONTEXT unchanged lines.
    for (let gap = 0; end < edits.length && gap <= 2 * CONTEXT; end++)
      gap = edits[end]?.op === " " ? gap + 1 : 0;
    end = trimTrailingContext(edits, end);
    out.push(renderHunk(edits.slice(start, end), lineA[start] as number, lineB[start] as number));
    i = end;
  }
  return out;
}

function trimTrailingContext(edits: readonly LineEdit[], end: number): number {
  let last = end;
  while (last > 0 && edits[last - 1]?.op === " ") last--;
  return Math.min(edits.length, last + CONTEXT);
}

/** Number of lines of the old (or new) file before each edit index. */
function prefixCounts(edits: readonly LineEdit[], skip: LineEdit["op"]): number[] {
  const counts = [0];
  for (const edit of edits) counts.push((counts[counts.length - 1] as number) + (edit.op === skip ? 0 : 1));
  return counts;
}

function renderHunk(edits: readonly LineEdit[], before: number, after: number): string {
  const lenA = edits.filter((e) => e.op !== "+").length;
  const lenB = edits.filter((e) => e.op !== "-").length;
  const range = (start: number, len: number): string => `${len === 0 ? start : start + 1},${len}`;
  const body = edits.map(({ op, line }) =>
    line.endsWith("\n") ? `${op}${line}` : `${op}${line}\n\\ No newline at end of file\n`,
  );
  return `@@ -${range(before, lenA)} +${range(after, lenB)} @@\n${body.join("")}`;
}
