/**
 * What the documentation test does with a code block. `run`: type-check (TypeScript) and run it.
 * `compile-only`: type-check, do not run (it needs something the test cannot provide, such as a
 * real agent CLI). `skip`: neither (a fragment). A block is `run` unless the line before its
 * opening fence is a marker comment, which must say why:
 *
 *     <!-- doc-test: compile-only: needs the pi CLI -->
 */
export type BlockMode = "run" | "compile-only" | "skip";

export interface CodeBlock {
  /** Line of the opening fence (1-based). */
  line: number;
  lang: "ts" | "js";
  mode: BlockMode;
  /** The marker's reason, for `compile-only` and `skip`. */
  reason: string | undefined;
  code: string;
}

const LANGS: Record<string, CodeBlock["lang"]> = {
  ts: "ts",
  typescript: "ts",
  mts: "ts",
  js: "js",
  javascript: "js",
  mjs: "js",
};
const FENCE = /^(`{3,}|~{3,})\s*([\w-]*)/;
const MARKER = /^<!--\s*doc-test:\s*(.*?)\s*-->$/;
const MARKER_BODY = /^(compile-only|skip):\s*(\S.*)$/;

/** The TypeScript and JavaScript blocks of a Markdown document. Throws on a malformed marker. */
export function codeBlocks(markdown: string): CodeBlock[] {
  const lines = markdown.split(/\r?\n/);
  const blocks: CodeBlock[] = [];
  let previous = "";
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    const fence = FENCE.exec(line);
    if (!fence) {
      if (line.trim() !== "") previous = line.trim();
      continue;
    }
    const close = lines.findIndex((l, j) => j > i && l.trimEnd() === fence[1]);
    const end = close === -1 ? lines.length : close;
    const lang = LANGS[(fence[2] ?? "").toLowerCase()];
    if (lang)
      blocks.push({
        line: i + 1,
        lang,
        ...modeOf(previous, i + 1),
        code: lines.slice(i + 1, end).join("\n"),
      });
    i = end;
    previous = "";
  }
  return blocks;
}

function modeOf(previous: string, line: number): Pick<CodeBlock, "mode" | "reason"> {
  const marker = MARKER.exec(previous);
  if (!marker) return { mode: "run", reason: undefined };
  const body = MARKER_BODY.exec(marker[1] ?? "");
  if (!body) {
    throw new Error(
      `line ${line}: a doc-test marker is "<!-- doc-test: compile-only: <why> -->" or "<!-- doc-test: skip: <why> -->", got ${previous}`,
    );
  }
  return { mode: body[1] as BlockMode, reason: body[2] };
}
