import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import {
  APPROVAL_METHOD, EVENT_METHOD, EVENT_TYPES, ITEM_TYPES, METHODS, PROTOCOL_VERSION,
  type ThreadListParams, type ThreadReadParams, type ThreadSubscribeParams, type ThreadUndoParams, type UndoScope,
} from '../src/protocol';
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
  // over LSP the approval request is answered directly).
  const unused = ['opencomposer/approval/respond'];
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

test('the params of the newer methods name the schema\'s fields, and its required ones', () => {
  // The schema forbids other fields (additionalProperties: false).
  const sent: Record<string, object> = {
    ThreadListParams: { workspace: '/w' } satisfies ThreadListParams,
    ThreadReadParams: { thread_id: 't' } satisfies ThreadReadParams,
    ThreadSubscribeParams: { thread_id: 't', after_seq: 3 } satisfies ThreadSubscribeParams,
    ThreadUndoParams: { thread_id: 't', scope: 'turn', turn_id: 'u' } satisfies ThreadUndoParams,
  };
  for (const [name, params] of Object.entries(sent)) {
    const fields = Object.keys(params);
    assert.deepEqual(fields.filter((field) => !(field in defs[name].properties)), [], name);
    assert.deepEqual((defs[name].required ?? []).filter((field: string) => !fields.includes(field)), [], name);
  }
  const scopes: Record<UndoScope, true> = { edit: true, turn: true, thread: true };
  assert.deepEqual(sorted(Object.keys(scopes)), sorted(defs.ThreadUndoParams.properties.scope.enum));
  assert.ok('last_seq' in defs.ThreadReadResponse.properties);
});
