/** media/chat.js in a DOM (jsdom), with the page ChatView serves and a stand-in VS Code API. */

import { Uri } from './support/vscode';
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { JSDOM } from 'jsdom';
import { ChatView } from '../src/chatView';
import { BeforeContent } from '../src/fileActions';
import { itemHtml, itemView, turnEndHtml } from '../src/render';
import { approval, message } from './support/events';

const SCRIPT = readFileSync(path.join(__dirname, '..', '..', 'media', 'chat.js'), 'utf8');

function page() {
  let html = '';
  new ChatView(Uri.file('/ext') as any, () => undefined, new BeforeContent(), () => '/w').resolveWebviewView({
    webview: { cspSource: 'x', asWebviewUri: (uri: Uri) => uri, postMessage: async () => true,
      onDidReceiveMessage: () => {}, set html(value: string) { html = value; }, get html() { return html; } },
    onDidDispose: () => {},
  } as any);
  const dom = new JSDOM(html, { runScripts: 'outside-only' });
  dom.window.eval(`window.acquireVsCodeApi = () => ({ postMessage: (m) => window.__sent.push(JSON.stringify(m)) });`);
  // Recorded as JSON: objects from the page's realm have other prototypes.
  const raw: string[] = [];
  (dom.window as any).__sent = raw;
  const sent = { get all() { return raw.map((m) => JSON.parse(m)); } };
  dom.window.eval(SCRIPT);
  const document = dom.window.document;
  const deliver = (data: unknown) => dom.window.dispatchEvent(new dom.window.MessageEvent('message', { data }));
  const ids = () => Array.from(document.querySelectorAll('#items > .entry')).map((e) => (e as HTMLElement).dataset.id);
  return { dom, document, sent, deliver, ids };
}

const none = { pendingApprovals: new Set<string>() };
const html = (id: string, text: string) => itemHtml(itemView(message(id, text), none));

test('the page says it is ready, then draws what it is sent, in order', () => {
  const { sent, deliver, ids, document } = page();
  assert.deepEqual(sent.all, [{ type: 'ready' }]);
  deliver({ type: 'reset', items: [{ id: 'a', html: html('a', 'one') }] });
  deliver({ type: 'upsert', items: [{ id: 'c', index: 1, html: html('c', 'three') }] });
  deliver({ type: 'upsert', items: [{ id: 'b', index: 1, html: html('b', 'two') }] });
  deliver({ type: 'upsert', items: [{ id: 'a', index: 0, html: html('a', 'one!') }] });
  assert.deepEqual(ids(), ['a', 'b', 'c']);
  assert.equal(document.querySelector('[data-id="a"]')?.textContent, 'one!');
});

test('a redrawn item keeps its details open as the user left them', () => {
  const { deliver, document } = page();
  const reasoning = (text: string) => itemHtml(itemView({ type: 'reasoning', id: 'r', turn_id: 't',
    status: 'in_progress', text }, none));
  deliver({ type: 'upsert', items: [{ id: 'r', index: 0, html: reasoning('hm') }] });
  (document.querySelector('details') as HTMLDetailsElement).open = true;
  deliver({ type: 'upsert', items: [{ id: 'r', index: 0, html: reasoning('hmm') }] });
  assert.equal((document.querySelector('details') as HTMLDetailsElement).open, true);
});

test('while a turn runs, Send steers and Stop shows', () => {
  const { deliver, document } = page();
  deliver({ type: 'status', running: true, title: 'fix <it>' });
  assert.equal(document.getElementById('send')?.textContent, 'Steer');
  assert.equal((document.getElementById('stop') as HTMLButtonElement).hidden, false);
  assert.equal(document.getElementById('title')?.textContent, 'fix <it>');
  deliver({ type: 'status', running: false, title: 't' });
  assert.equal((document.getElementById('stop') as HTMLButtonElement).hidden, true);
});

test('Enter sends the text; Shift+Enter does not', () => {
  const { dom, sent, document } = page();
  const input = document.getElementById('input') as HTMLTextAreaElement;
  input.value = 'hello';
  input.dispatchEvent(new dom.window.KeyboardEvent('keydown', { key: 'Enter', shiftKey: true }));
  input.dispatchEvent(new dom.window.KeyboardEvent('keydown', { key: 'Enter' }));
  assert.deepEqual(sent.all.slice(1), [{ type: 'send', text: 'hello' }]);
  assert.equal(input.value, '');
});

test('an approval button answers with the note, once', () => {
  const { sent, deliver, document } = page();
  deliver({ type: 'upsert', items: [{ id: 'a1', index: 0,
    html: itemHtml(itemView(approval('a1'), { pendingApprovals: new Set(['a1']) })) }] });
  (document.querySelector('.approval-note') as HTMLInputElement).value = 'use make clean';
  (document.querySelector('[data-decision="deny"]') as HTMLButtonElement).click();
  assert.deepEqual(sent.all.at(-1), { type: 'approval', itemId: 'a1', decision: 'deny', message: 'use make clean' });
  assert.ok(Array.from(document.querySelectorAll('.buttons button')).every((b) => (b as HTMLButtonElement).disabled));
});

test('file buttons ask the extension to open or diff a file, or revert the turn', () => {
  const { sent, deliver, document } = page();
  const change = itemHtml(itemView({ type: 'file_change', id: 'f', turn_id: 't', status: 'completed', call_id: 'c',
    tool: 'edit_file', arguments: {}, changes: [{ path: 'a.py', kind: 'update', diff: '@@ -1 +1 @@\n-a\n+b\n' }] }, none));
  deliver({ type: 'upsert', items: [{ id: 'f', index: 0, html: change + turnEndHtml('turn_1', 1) }] });
  for (const action of ['openFile', 'openDiff', 'revertTurn']) {
    (document.querySelector(`[data-action="${action}"]`) as HTMLButtonElement).click();
  }
  assert.deepEqual(sent.all.slice(1), [
    { type: 'openFile', path: 'a.py' },
    { type: 'openDiff', itemId: 'f', index: 0 },
    { type: 'revertTurn', turnId: 'turn_1' },
  ]);
});
