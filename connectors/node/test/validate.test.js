'use strict';
// Argument validation (SPEC §4): every bad argument is kind `invalid`, and good boundaries pass.
const test = require('node:test');
const assert = require('node:assert/strict');
const { validateVerb, MAX_MS, MAX_I32 } = require('../src/validate');

const base = {
  enqueue: { session: 's', queue: 'q', payload: 'p', delay_ms: 0 },
  browse: { session: 's', queue: 'q', offset: 0, limit: 10 },
  pending_size: { session: 's', queue: 'q' },
  claim: { session: 's', queue: 'q', lease_ms: 30000 },
  complete: { session: 's', queue: 'q', id: 'j0000000000000001', attempts: 1 },
  retry: { session: 's', queue: 'q', id: 'j0000000000000001', attempts: 1, backoff_ms: 0, max_attempts: 3 },
  promote: { session: 's', queue: 'q', limit: 100 },
  reap: { session: 's', queue: 'q', max_attempts: 3, limit: 100 },
  pipeline_probe: { session: 's', key: 'probe', n: 1 },
  batch: { session: 's', queue: 'q', n: 1, depth: 1, payload: '' },
  connect: { session: 's', url: 'redis://:pw@127.0.0.1:6379/0' },
  disconnect: { session: 's' },
};

function rejects(cmd, patch, pattern) {
  const req = { ...base[cmd], ...patch };
  for (const [k, v] of Object.entries(patch)) if (v === undefined) delete req[k];
  assert.throws(() => validateVerb(cmd, req), (err) => {
    assert.equal(err.kind, 'invalid', `${cmd} ${JSON.stringify(patch)}`);
    if (pattern) assert.match(err.message, pattern);
    return true;
  });
}

const accepts = (cmd, patch = {}) => validateVerb(cmd, { ...base[cmd], ...patch });

test('all base requests are valid', () => {
  for (const cmd of Object.keys(base)) accepts(cmd);
});

test('queue names: 1..128 of [A-Za-z0-9._-]', () => {
  accepts('enqueue', { queue: 'a' });
  accepts('enqueue', { queue: 'x'.repeat(128) });
  accepts('enqueue', { queue: 'A.b_c-9' });
  for (const queue of ['', 'x'.repeat(129), 'bad queue', 'a:b', 'a{b}', 'é', 'a/b', 'a\n']) {
    rejects('enqueue', { queue }, /queue/);
  }
  rejects('claim', { queue: 5 });
  rejects('claim', { queue: undefined });
});

test('milliseconds in 0..=1e12, integers only', () => {
  for (const [cmd, f] of [['enqueue', 'delay_ms'], ['claim', 'lease_ms'], ['retry', 'backoff_ms']]) {
    accepts(cmd, { [f]: 0 });
    accepts(cmd, { [f]: MAX_MS });
    rejects(cmd, { [f]: -1 }, new RegExp(`${f} must be >= 0`));
    rejects(cmd, { [f]: MAX_MS + 1 });
    rejects(cmd, { [f]: 1.5 });
    rejects(cmd, { [f]: '5' });
    rejects(cmd, { [f]: true });
    rejects(cmd, { [f]: undefined });
  }
});

test('attempts >= 0, max_attempts >= 1, limit and offset >= 0', () => {
  accepts('complete', { attempts: 0 });
  rejects('complete', { attempts: -1 });
  rejects('retry', { attempts: -1 });
  accepts('retry', { max_attempts: 1 });
  rejects('retry', { max_attempts: 0 });
  rejects('reap', { max_attempts: 0 });
  accepts('promote', { limit: 0 });
  rejects('promote', { limit: -1 });
  rejects('reap', { limit: -1 });
  accepts('browse', { offset: 0, limit: 0 });
  rejects('browse', { offset: -1 });
  rejects('browse', { limit: -1 });
  rejects('browse', { limit: 2 ** 60 }); // beyond exact JSON integers in JS
});

test('ids match ^j[0-9]{16}$', () => {
  for (const id of ['j000000000000001', 'j00000000000000001', 'J0000000000000001', 'j000000000000000a', '', ' j0000000000000001']) {
    rejects('complete', { id }, /id/);
    rejects('retry', { id });
  }
});

test('n >= 1 and depth >= 1; probe key non-empty and outside EchoMQ', () => {
  rejects('batch', { n: 0 });
  rejects('batch', { depth: 0 });
  rejects('pipeline_probe', { n: 0 });
  rejects('pipeline_probe', { key: '' });
  rejects('pipeline_probe', { key: 'emq:probe' }, /must not be under/);
  rejects('pipeline_probe', { key: 'emq:{q}:seq' });
  accepts('pipeline_probe', { key: 'probe:emq', n: 10000 });
});

test('payloads are strings; sessions are non-empty strings; urls are redis://', () => {
  rejects('enqueue', { payload: 1 });
  rejects('enqueue', { payload: undefined });
  rejects('batch', { payload: null });
  accepts('enqueue', { payload: '' });
  rejects('claim', { session: '' });
  rejects('claim', { session: 7 });
  rejects('claim', { session: undefined });
  rejects('connect', { url: 'http://x:1' });
  rejects('connect', { url: 'not a url' });
  rejects('connect', { url: 'redis://h:1/zero' });
  accepts('connect', { url: 'redis://127.0.0.1:6379' });
});

test('caps the cases pin: i32 counts, probe n <= 1e6, batch n <= 1e7, batch depth <= 1e5', () => {
  for (const [cmd, f] of [['complete', 'attempts'], ['retry', 'attempts'], ['retry', 'max_attempts'],
    ['reap', 'max_attempts'], ['reap', 'limit'], ['promote', 'limit'], ['browse', 'offset'], ['browse', 'limit']]) {
    accepts(cmd, { [f]: MAX_I32 });
    rejects(cmd, { [f]: MAX_I32 + 1 }, new RegExp(f));
  }
  accepts('pipeline_probe', { n: 1_000_000 });
  rejects('pipeline_probe', { n: 1_000_001 });
  accepts('batch', { n: 200_000, depth: 100_000 });
  rejects('batch', { depth: 100_001 });
  accepts('batch', { n: 10_000_000 });
  rejects('batch', { n: 10_000_001 }, /n/);
  rejects('enqueue', { delay_ms: 9007199254740993 });
});

test('batch queues (R4.12): absent, or 1..64 queue names led by queue', () => {
  assert.equal(accepts('batch').args.queues, undefined);
  assert.deepEqual(accepts('batch', { queues: ['q'] }).args.queues, ['q']);
  const many = ['q', ...Array.from({ length: 63 }, (_, i) => `q${i}`)];
  assert.deepEqual(accepts('batch', { queues: many }).args.queues, many);
  accepts('batch', { queues: ['q', 'q', 'x'.repeat(128), 'A.b_c-9'] });
  for (const queues of [[], ['q', ...Array.from({ length: 64 }, (_, i) => `q${i}`)], 'q', { 0: 'q' }, null, 5,
    ['q', 5], ['q', null], ['q', ['b']], ['q', ''], ['q', 'x'.repeat(129)], ['q', 'b c'], ['q', 'a{b}'], ['q', 'é'],
    ['b', 'q']]) {
    rejects('batch', { queues }, /queue/);
  }
});

test('connect cluster (R8.1): absent or a boolean; a cluster url names any database (R8.5)', () => {
  assert.equal(accepts('connect').args.cluster, false);
  assert.equal(accepts('connect', { cluster: false }).args.cluster, false);
  assert.equal(accepts('connect', { cluster: true }).args.cluster, true);
  for (const cluster of [null, 1, 0, 'true', 'yes', [], {}]) rejects('connect', { cluster }, /cluster must be a boolean/);
  accepts('connect', { cluster: true, url: 'redis://:pw@127.0.0.1:7000' });
  accepts('connect', { cluster: true, url: 'redis://:pw@127.0.0.1:7000/' });
  // Any number: the engine alone knows its `cluster-databases` and the user's `db=` (R8.5), so
  // /16 past 16 databases and /3 a user may not use are sent, and refused by the engine.
  for (const db of ['0', '1', '3', '9', '16', '9999']) {
    const url = `redis://emq:pw@127.0.0.1:7000/${db}`;
    assert.equal(accepts('connect', { cluster: true, url }).args.url, url);
    assert.equal(accepts('connect', { cluster: true, url: url.replace('redis:', 'rediss:') }).args.cluster, true);
  }
  // Not a number is the url rule (R9.1), cluster or not.
  for (const db of ['abc', '1x', '-1', '9.0']) rejects('connect', { cluster: true, url: `redis://:pw@127.0.0.1:7000/${db}` }, /database/);
  accepts('connect', { cluster: false, url: 'redis://:pw@127.0.0.1:7000/1' });
});
