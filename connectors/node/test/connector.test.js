'use strict';
// Session handling and verb dispatch against a fake engine: invalid requests send nothing,
// unknown sessions are invalid, a lost connection is re-opened (fence and all) on the next verb.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { Connector } = require('../src/connector');
const { loadBundle } = require('../src/bundle');
const { engine: engineError } = require('../src/errors');

const bundle = loadBundle(path.resolve(__dirname, '..', '..', '..', 'bundle'));

function fakeWorld() {
  const calls = [];
  const opened = [];
  const open = async (url, b, log, { cluster } = {}) => {
    calls.push(cluster ? ['open', url, 'cluster'] : ['open', url]);
    const e = {
      alive: true,
      close() { this.alive = false; calls.push(['close', url]); },
      async evalScript(name, queue, args) {
        calls.push(['eval', name, queue, ...args]);
        if (name === 'claim') return queue === 'empty' ? [] : ['j0000000000000001', 'hi', 1];
        if (name === 'complete') return 1;
        if (name === 'retry') return 'delayed';
        if (name === 'enqueue') return 'j0000000000000001';
        return 0;
      },
      async evalPipelined(name, queue, args, count) {
        calls.push(['pipeline', name, queue, count]);
        return Array.from({ length: count }, (_, i) => `j${String(i + 1).padStart(16, '0')}`);
      },
      async evalPipelinedOver(name, queues, args) {
        calls.push(['pipeline-over', name, queues.join(',')]);
        return queues.map((_, i) => `j${String(i + 1).padStart(16, '0')}`);
      },
      async browse() { calls.push(['browse']); return []; },
      async pendingSize() { calls.push(['zcard']); return 0; },
      async probe(key, n) { calls.push(['probe', key, n]); return Array.from({ length: n }, (_, i) => i + 1); },
    };
    opened.push(e);
    return e;
  };
  return { calls, opened, connector: new Connector(bundle, { open }) };
}

const kindOf = async (p) => p.then(() => 'ok', (e) => e.kind);

test('hello names the bundle and its SHAs', async () => {
  const { connector } = fakeWorld();
  const h = await connector.handle({ cmd: 'hello', protocol: 1 });
  assert.equal(h.bundle, '1.0.0');
  assert.equal(h.scripts.reap, '9dd90df5c4a0ad76d4d9f25d0eaa3645aedde54a');
  assert.equal(await kindOf(connector.handle({ cmd: 'hello', protocol: 2 })), 'unsupported');
  assert.equal(await kindOf(connector.handle({ cmd: 'frobnicate' })), 'unsupported');
});

test('verbs on unknown or disconnected sessions are invalid and send nothing', async () => {
  const { connector, calls } = fakeWorld();
  assert.equal(await kindOf(connector.handle({ cmd: 'claim', session: 'w', queue: 'q', lease_ms: 1 })), 'invalid');
  assert.equal(await kindOf(connector.handle({ cmd: 'disconnect', session: 'w' })), 'invalid');
  await connector.handle({ cmd: 'connect', session: 'w', url: 'redis://h:1/0' });
  await connector.handle({ cmd: 'disconnect', session: 'w' });
  assert.equal(await kindOf(connector.handle({ cmd: 'pending_size', session: 'w', queue: 'q' })), 'invalid');
  assert.deepEqual(calls.map((c) => c[0]), ['open', 'close']);
});

test('invalid arguments reach no engine call', async () => {
  const { connector, calls } = fakeWorld();
  await connector.handle({ cmd: 'connect', session: 'w', url: 'redis://h:1/0' });
  const bad = [
    { cmd: 'enqueue', queue: 'bad queue', payload: '', delay_ms: 0 },
    { cmd: 'claim', queue: 'q', lease_ms: -1 },
    { cmd: 'complete', queue: 'q', id: 'x', attempts: 1 },
    { cmd: 'retry', queue: 'q', id: 'j0000000000000001', attempts: 1, backoff_ms: 0, max_attempts: 0 },
    { cmd: 'pipeline_probe', key: 'emq:x', n: 1 },
    { cmd: 'batch', queue: 'q', n: 1, depth: 0, payload: '' },
  ];
  for (const req of bad) assert.equal(await kindOf(connector.handle({ session: 'w', ...req })), 'invalid', req.cmd);
  assert.deepEqual(calls, [['open', 'redis://h:1/0']]);
});

test('verbs shape replies: claim null/object, complete boolean, batch count', async () => {
  const { connector, calls } = fakeWorld();
  await connector.handle({ cmd: 'connect', session: 'w', url: 'redis://h:1/0' });
  const s = { session: 'w' };
  assert.equal(await connector.handle({ ...s, cmd: 'claim', queue: 'empty', lease_ms: 0 }), null);
  assert.deepEqual(await connector.handle({ ...s, cmd: 'claim', queue: 'q', lease_ms: 0 }), { id: 'j0000000000000001', payload: 'hi', attempts: 1 });
  assert.equal(await connector.handle({ ...s, cmd: 'complete', queue: 'q', id: 'j0000000000000001', attempts: 1 }), true);
  assert.equal(await connector.handle({ ...s, cmd: 'batch', queue: 'q', n: 7, depth: 3, payload: 'p' }), 7);
  assert.deepEqual(calls.filter((c) => c[0] === 'pipeline').map((c) => c[3]), [3, 3, 1]);
  assert.deepEqual(await connector.handle({ ...s, cmd: 'browse', queue: 'q', offset: 0, limit: 0 }), []);
  assert.ok(!calls.some((c) => c[0] === 'browse'), 'limit 0 sends nothing');
});

test('a lost connection is reported once and re-opened (fence included) on the next verb', async () => {
  const { connector, opened, calls } = fakeWorld();
  await connector.handle({ cmd: 'connect', session: 'w', url: 'redis://h:1/0' });
  const first = opened[0];
  first.evalScript = async () => {
    first.alive = false;
    throw engineError('engine connection failed: Socket closed unexpectedly');
  };
  const req = { cmd: 'enqueue', session: 'w', queue: 'q', payload: 'x', delay_ms: 0 };
  assert.equal(await kindOf(connector.handle(req)), 'engine');
  assert.equal(await connector.handle(req), 'j0000000000000001');
  assert.equal(opened.length, 2);
  assert.equal(calls.filter((c) => c[0] === 'eval').length, 1, 'the failed call was not re-sent by the connector');
});

test('sessions are independent', async () => {
  const { connector, opened } = fakeWorld();
  await connector.handle({ cmd: 'connect', session: 'a', url: 'redis://h:1/0' });
  await connector.handle({ cmd: 'connect', session: 'b', url: 'redis://h:1/0' });
  await connector.handle({ cmd: 'disconnect', session: 'a' });
  assert.equal(await connector.handle({ cmd: 'pending_size', session: 'b', queue: 'q' }), 0);
  assert.deepEqual(opened.map((e) => e.alive), [false, true]);
});

test('batch over queues: enqueue i goes to queues[i % len], depth per pipeline', async () => {
  const { connector, calls } = fakeWorld();
  await connector.handle({ cmd: 'connect', session: 'w', url: 'redis://h:1/0' });
  const req = { cmd: 'batch', session: 'w', queue: 'a', n: 7, depth: 3, payload: 'p', queues: ['a', 'b'] };
  assert.equal(await connector.handle(req), 7);
  assert.deepEqual(calls.filter((c) => c[0].startsWith('pipeline')), [
    ['pipeline-over', 'enqueue', 'a,b,a'],
    ['pipeline-over', 'enqueue', 'b,a,b'],
    ['pipeline-over', 'enqueue', 'a'],
  ]);
  for (const queues of [[], ['b', 'a'], ['a', 'bad queue'], 'a']) {
    assert.equal(await kindOf(connector.handle({ ...req, queues })), 'invalid');
  }
  assert.equal(calls.filter((c) => c[0].startsWith('pipeline')).length, 3, 'invalid batches sent nothing');
});

test('connect cluster: true opens a cluster session, and a lost one is re-opened as one', async () => {
  const { connector, opened, calls } = fakeWorld();
  assert.equal(await kindOf(connector.handle({ cmd: 'connect', session: 'w', url: 'redis://h:1/0', cluster: 'yes' })), 'invalid');
  assert.equal(await kindOf(connector.handle({ cmd: 'connect', session: 'w', url: 'redis://h:1/x', cluster: true })), 'invalid');
  assert.deepEqual(calls, [], 'invalid connects open nothing');
  await connector.handle({ cmd: 'connect', session: 'w', url: 'redis://h:1/0', cluster: true });
  await connector.handle({ cmd: 'connect', session: 's', url: 'redis://h:1/0', cluster: false });
  // R8.5: a cluster url names a database like any url; the session (and its reopen) keeps it.
  await connector.handle({ cmd: 'connect', session: 'd', url: 'redis://h:1/9', cluster: true });
  opened[0].alive = false;
  opened[2].alive = false;
  await connector.handle({ cmd: 'pending_size', session: 'w', queue: 'q' });
  await connector.handle({ cmd: 'pending_size', session: 'd', queue: 'q' });
  assert.deepEqual(calls.filter((c) => c[0] === 'open'), [
    ['open', 'redis://h:1/0', 'cluster'],
    ['open', 'redis://h:1/0'],
    ['open', 'redis://h:1/9', 'cluster'],
    ['open', 'redis://h:1/0', 'cluster'],
    ['open', 'redis://h:1/9', 'cluster'],
  ]);
});
