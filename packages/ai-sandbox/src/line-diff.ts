/** One line-level edit; lines keep their `\n` terminator so a missing final newline is a change. */
export interface LineEdit {
  op: " " | "-" | "+";
  line: string;
}

/** Beyond this many differing lines Myers' trace gets large; the changed middle becomes one replace. */
const MAX_EDIT_DISTANCE = 4000;

export function splitLines(text: string): string[] {
  const lines = text.split(/(?<=\n)/);
  return lines.length === 1 && lines[0] === "" ? [] : lines;
}

/** Myers O(ND) diff of two line arrays, common prefix/suffix trimmed first. */
export function diffLines(a: readonly string[], b: readonly string[]): LineEdit[] {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const same = (lines: readonly string[]): LineEdit[] => lines.map((line) => ({ op: " ", line }));
  const middle = myers(a.slice(start, endA), b.slice(start, endB));
  return [...same(a.slice(0, start)), ...middle, ...same(a.slice(endA))];
}

function myers(a: readonly string[], b: readonly string[]): LineEdit[] {
  const n = a.length;
  const m = b.length;
  const max = n + m;
  if (max === 0) return [];
  const offset = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  for (let d = 0; d <= Math.min(max, MAX_EDIT_DISTANCE); d++) {
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      const down = k === -d || (k !== d && (v[offset + k - 1] as number) < (v[offset + k + 1] as number));
      let x = down ? (v[offset + k + 1] as number) : (v[offset + k - 1] as number) + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) return backtrack(trace, a, b, offset);
    }
  }
  return [
    ...a.map((line): LineEdit => ({ op: "-", line })),
    ...b.map((line): LineEdit => ({ op: "+", line })),
  ];
}

function backtrack(
  trace: Int32Array[],
  a: readonly string[],
  b: readonly string[],
  offset: number,
): LineEdit[] {
  const edits: LineEdit[] = [];
  let x = a.length;
  let y = b.length;
  for (let d = trace.length - 1; d >= 0; d--) {
    const v = trace[d] as Int32Array;
    const k = x - y;
    const down = k === -d || (k !== d && (v[offset + k - 1] as number) < (v[offset + k + 1] as number));
    const prevK = down ? k + 1 : k - 1;
    const prevX = v[offset + prevK] as number;
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      x--;
      y--;
      edits.push({ op: " ", line: a[x] as string });
    }
    if (d > 0) {
      if (down) edits.push({ op: "+", line: b[--y] as string });
      else edits.push({ op: "-", line: a[--x] as string });
    }
  }
  return edits.reverse();
}
