import * as assert from 'node:assert/strict';
import { test } from 'node:test';
import { diffLines, reverseApply } from '../src/patch';

// Diffs as the server writes them (agent/tools/changes.py `unified_diff`).
const TWO_HUNKS = '--- a/src/x.py\n+++ b/src/x.py\n@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n'
  + '@@ -10,3 +10,4 @@\n j\n k\n l\n+m\n';
const BEFORE = 'a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\n';
const AFTER = 'a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n';
const CRLF_NO_EOL = '--- a/w.txt\n+++ b/w.txt\n@@ -1,3 +1,4 @@\n one\r\n-two\r\n-three\n'
  + '\\ No newline at end of file\n+2\r\n+three\r\n+four\n\\ No newline at end of file\n';
const ADDED = '--- /dev/null\n+++ b/n.py\n@@ -0,0 +1 @@\n+new\n';

test('diff lines are classified and numbered on both sides', () => {
  assert.deepEqual(diffLines(TWO_HUNKS).slice(0, 7), [
    { kind: 'header', text: '--- a/src/x.py' },
    { kind: 'header', text: '+++ b/src/x.py' },
    { kind: 'hunk', text: '@@ -1,5 +1,5 @@' },
    { kind: 'context', text: 'a', oldLine: 1, newLine: 1 },
    { kind: 'del', text: 'b', oldLine: 2 },
    { kind: 'add', text: 'B', newLine: 2 },
    { kind: 'context', text: 'c', oldLine: 3, newLine: 3 },
  ]);
  assert.deepEqual(diffLines(TWO_HUNKS).at(-1), { kind: 'add', text: 'm', newLine: 13 });
});

test('line endings and "no newline" markers are shown, not kept in the text', () => {
  assert.deepEqual(diffLines(CRLF_NO_EOL).slice(3), [
    { kind: 'context', text: 'one', oldLine: 1, newLine: 1 },
    { kind: 'del', text: 'two', oldLine: 2 },
    { kind: 'del', text: 'three', oldLine: 3 },
    { kind: 'note', text: '\\ No newline at end of file' },
    { kind: 'add', text: '2', newLine: 2 },
    { kind: 'add', text: 'three', newLine: 3 },
    { kind: 'add', text: 'four', newLine: 4 },
    { kind: 'note', text: '\\ No newline at end of file' },
  ]);
});

test('applied backwards, a diff gives back the file it was made from', () => {
  assert.equal(reverseApply(AFTER, TWO_HUNKS), BEFORE);
  assert.equal(reverseApply('one\r\n2\r\nthree\r\nfour', CRLF_NO_EOL), 'one\r\ntwo\r\nthree');
  assert.equal(reverseApply('new\n', ADDED), '');
});

test('a file changed since the diff, or a cut diff, cannot be reverted', () => {
  assert.equal(reverseApply(AFTER.replace('B', 'BB'), TWO_HUNKS), undefined);
  assert.equal(reverseApply(AFTER.slice(0, 4), TWO_HUNKS), undefined);
  assert.equal(reverseApply(AFTER, TWO_HUNKS + '\n[diff cut at 200,000 characters]\n'), undefined);
  assert.equal(reverseApply(AFTER, ''), undefined);
});
