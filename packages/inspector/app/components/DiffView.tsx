import { structuredPatch } from "diff";
import { useMemo } from "preact/hooks";

const CONTEXT_LINES = 3;

/** A file edit as a unified diff: hunks with line numbers, additions and deletions coloured. */
export function DiffView({
  path,
  oldText,
  newText,
}: {
  path: string;
  oldText: string | null | undefined;
  newText: string;
}) {
  const patch = useMemo(
    () => structuredPatch(path, path, oldText ?? "", newText, "", "", { context: CONTEXT_LINES }),
    [path, oldText, newText],
  );
  const added = patch.hunks.reduce((n, h) => n + h.lines.filter((l) => l.startsWith("+")).length, 0);
  const removed = patch.hunks.reduce((n, h) => n + h.lines.filter((l) => l.startsWith("-")).length, 0);
  return (
    <div class="diff">
      <div class="diff-header">
        <span class="diff-path">{path}</span>
        {oldText == null && <span class="badge">new file</span>}
        <span class="diff-stat">
          <span class="add">+{added}</span> <span class="del">−{removed}</span>
        </span>
      </div>
      {patch.hunks.length === 0 && <div class="diff-empty muted">no changes</div>}
      <table class="diff-lines">
        {patch.hunks.map((hunk) => {
          let oldLine = hunk.oldStart;
          let newLine = hunk.newStart;
          return (
            <tbody key={`${hunk.oldStart}-${hunk.newStart}`}>
              <tr class="hunk">
                <td colSpan={3}>
                  @@ −{hunk.oldStart},{hunk.oldLines} +{hunk.newStart},{hunk.newLines} @@
                </td>
              </tr>
              {hunk.lines
                .filter((line) => !line.startsWith("\\"))
                .map((line, i) => {
                  const sign = line[0];
                  const cls = sign === "+" ? "add" : sign === "-" ? "del" : "ctx";
                  const left = sign === "+" ? "" : oldLine++;
                  const right = sign === "-" ? "" : newLine++;
                  return (
                    <tr key={i} class={cls}>
                      <td class="ln">{left}</td>
                      <td class="ln">{right}</td>
                      <td class="code">
                        <span class="sign">{sign === " " ? " " : sign}</span>
                        {line.slice(1)}
                      </td>
                    </tr>
                  );
                })}
            </tbody>
          );
        })}
      </table>
    </div>
  );
}
