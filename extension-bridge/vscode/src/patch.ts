/**
 * The unified diffs of `file_change` items (git style, from Python's difflib): lines to show,
 * and the file as it was before, rebuilt from its current text by applying the diff backwards
 * (the left side of a diff editor). Pure logic: no `vscode` here.
 */

export type DiffLineKind = 'header' | 'hunk' | 'add' | 'del' | 'context' | 'note';

export interface DiffLine {
  kind: DiffLineKind;
  /** The line without its +/-/space marker and line ending. */
  text: string;
  /** Line number in the old file (`del`, `context`). */
  oldLine?: number;
  /** Line number in the new file (`add`, `context`). */
  newLine?: number;
}

interface Hunk {
  newStart: number;
  newCount: number;
  /** Lines with their endings, as in the file. */
  oldLines: string[];
  newLines: string[];
}

const HUNK = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;
const NO_NEWLINE = '\\ No newline at end of file';

export function diffLines(diff: string): DiffLine[] {
  const out: DiffLine[] = [];
  let oldLine = 0;
  let newLine = 0;
  let inHunk = false;
  for (const raw of splitLines(diff)) {
    const line = raw.replace(/\r?\n$/, '');
    const hunk = HUNK.exec(line);
    if (hunk) {
      inHunk = true;
      oldLine = Number(hunk[1]);
      newLine = Number(hunk[3]);
      out.push({ kind: 'hunk', text: line });
    } else if (!inHunk && (line.startsWith('--- ') || line.startsWith('+++ '))) {
      out.push({ kind: 'header', text: line });
    } else if (inHunk && line.startsWith('+')) {
      out.push({ kind: 'add', text: line.slice(1).replace(/\r$/, ''), newLine: newLine++ });
    } else if (inHunk && line.startsWith('-')) {
      out.push({ kind: 'del', text: line.slice(1).replace(/\r$/, ''), oldLine: oldLine++ });
    } else if (inHunk && line.startsWith(' ')) {
      out.push({ kind: 'context', text: line.slice(1).replace(/\r$/, ''), oldLine: oldLine++,
        newLine: newLine++ });
    } else if (line !== '') {
      out.push({ kind: 'note', text: line });
    }
  }
  return out;
}

/**
 * The text the diff was made from, given the text it produced; undefined when the file no
 * longer matches the diff (changed since) or the diff is incomplete (cut, binary).
 */
export function reverseApply(current: string, diff: string): string | undefined {
  const hunks = parseHunks(diff);
  if (hunks === undefined) return undefined;
  const lines = splitLines(current);
  // Backwards, so that earlier hunks' positions stay valid.
  for (const hunk of [...hunks].reverse()) {
    const at = hunk.newCount === 0 ? hunk.newStart : hunk.newStart - 1;
    const found = lines.slice(at, at + hunk.newLines.length);
    if (found.length !== hunk.newLines.length || found.some((line, i) => line !== hunk.newLines[i])) {
      return undefined;
    }
    lines.splice(at, hunk.newLines.length, ...hunk.oldLines);
  }
  return lines.join('');
}

function parseHunks(diff: string): Hunk[] | undefined {
  const hunks: Hunk[] = [];
  let hunk: Hunk | undefined;
  // The side(s) the previous line belongs to, for "\ No newline at end of file".
  let last: string[][] = [];
  for (const raw of splitLines(diff)) {
    const line = raw.endsWith('\n') ? raw.slice(0, -1) : raw;
    const header = HUNK.exec(line);
    if (header) {
      hunk = { newStart: Number(header[3]), newCount: Number(header[4] ?? '1'), oldLines: [],
        newLines: [] };
      hunks.push(hunk);
      last = [];
    } else if (hunk === undefined) {
      continue; // the --- / +++ header
    } else if (line === NO_NEWLINE) {
      for (const side of last) side[side.length - 1] = side[side.length - 1].slice(0, -1);
    } else if (line.startsWith('+')) {
      hunk.newLines.push(line.slice(1) + '\n');
      last = [hunk.newLines];
    } else if (line.startsWith('-')) {
      hunk.oldLines.push(line.slice(1) + '\n');
      last = [hunk.oldLines];
    } else if (line.startsWith(' ')) {
      hunk.oldLines.push(line.slice(1) + '\n');
      hunk.newLines.push(line.slice(1) + '\n');
      last = [hunk.oldLines, hunk.newLines];
    } else if (line !== '') {
      return undefined; // "[diff cut at N characters]": not the whole change
    }
  }
  return hunks.length > 0 ? hunks : undefined;
}

/** Lines with their endings (the last one may have none). */
function splitLines(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}
