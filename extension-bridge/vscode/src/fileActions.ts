/**
 * What the chat's file buttons do: open a file the agent referenced or changed, and show a
 * change in a diff editor (the "before" side rebuilt from the file and the diff). Reverting is
 * the server's (`thread/undo`), which has the files' earlier contents, not just the diffs.
 */

import * as vscode from 'vscode';
import { reverseApply } from './patch';
import type { FileChange } from './protocol';

export const BEFORE_SCHEME = 'opencomposer-before';

/** Texts of the "before" sides of open diff editors, by URI. */
export class BeforeContent implements vscode.TextDocumentContentProvider {
  private readonly texts = new Map<string, string>();

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? '';
  }

  put(path: string, text: string): vscode.Uri {
    const uri = vscode.Uri.from({ scheme: BEFORE_SCHEME, path: '/' + path, query: String(Date.now()) });
    this.texts.set(uri.toString(), text);
    return uri;
  }
}

export function resolve(root: string, path: string): vscode.Uri {
  return /^([a-zA-Z]:[\\/]|\/)/.test(path) ? vscode.Uri.file(path) : vscode.Uri.joinPath(vscode.Uri.file(root), path);
}

/** `lines`: "start-end", 1-based. */
export async function openFile(root: string, path: string, lines?: string): Promise<void> {
  const [start, end] = (lines ?? '').split('-').map(Number);
  const selection = start ? new vscode.Range(start - 1, 0, (end || start) - 1, 0) : undefined;
  await vscode.window.showTextDocument(resolve(root, path), { selection, preview: true });
}

export async function openDiff(root: string, change: FileChange, before: BeforeContent): Promise<void> {
  const uri = resolve(root, change.move_to ?? change.path);
  const current = change.kind === 'delete' ? undefined : await readText(uri);
  const original = current === undefined ? undefined : reverseApply(current, change.diff);
  if (original === undefined) {
    // Deleted, changed since, or the diff is incomplete: show the diff itself.
    const document = await vscode.workspace.openTextDocument({ language: 'diff', content: change.diff });
    await vscode.window.showTextDocument(document, { preview: true });
    return;
  }
  await vscode.commands.executeCommand('vscode.diff', before.put(change.path, original), uri,
    `${change.path} (opencomposer's change)`);
}

async function readText(uri: vscode.Uri): Promise<string | undefined> {
  try {
    return (await vscode.workspace.openTextDocument(uri)).getText();
  } catch {
    return undefined;
  }
}
