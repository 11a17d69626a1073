import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { APPROVAL_METHOD, EVENT_METHOD, EVENT_TYPES, ITEM_TYPES, METHODS, PROTOCOL_VERSION } from '../src/protocol';
import { APPROVAL_BUTTONS } from '../src/render';

// The schema the server generates from its models (checked in beside this extension).
const SCHEMA = JSON.parse(readFileSync(path.join(__dirname, '..', '..', '..', 'protocol',
  'opencomposer-protocol.schema.json'), 'utf8'));
const defs = SCHEMA.$defs;

const sorted = (values: Iterable<string>) => [...values].sort();

test('the protocol version is the one this client was written for', () => {
  assert.equal(SCHEMA.protocol_version, PROTOCOL_VERSION);
});

test('item, event and delta types match the schema', () => {
  assert.deepEqual(sorted(ITEM_TYPES), sorted(Object.keys(defs.Item.discriminator.mapping)));
  assert.deepEqual(sorted(EVENT_TYPES), sorted(Object.keys(defs.Event.discriminator.mapping)));
  assert.deepEqual(sorted(Object.keys(defs.ItemDelta.discriminator.mapping)), ['output', 'text']);
});

test('every approval decision has a button', () => {
  assert.deepEqual(sorted(APPROVAL_BUTTONS.map((b) => b.decision)), sorted(defs.ApprovalDecision.enum));
});

test('the methods called are the schema\'s client -> server requests', () => {
  const clientToServer = Object.entries(SCHEMA.methods)
    .filter(([, method]: [string, any]) => method.direction === 'client_to_server')
    .map(([name]) => `opencomposer/${name}`);
  // Not called: approval/respond is for transports without server -> client requests (HTTP;
  // over LSP the approval request is answered directly), and thread/read's snapshot carries no
  // seq to follow the events from, so a thread is loaded by replaying thread/events instead.
  const unused = ['opencomposer/approval/respond', 'opencomposer/thread/read'];
  assert.deepEqual(sorted(Object.values(METHODS)), sorted(clientToServer.filter((name) => !unused.includes(name))));
});

test('the server -> client messages are the event notification and the approval request', () => {
  const serverToClient = Object.fromEntries(Object.entries(SCHEMA.methods)
    .filter(([, method]: [string, any]) => method.direction === 'server_to_client')
    .map(([name, method]: [string, any]) => [name, method.kind]));
  assert.deepEqual(serverToClient, { 'approval/request': 'request', event: 'notification' });
  assert.equal(EVENT_METHOD, 'opencomposer/event');
  // Over LSP every method carries the opencomposer/ prefix (capabilities.experimental says so).
  assert.equal(APPROVAL_METHOD, 'opencomposer/approval/request');
});
