'use strict';
// Live checks of the engine seam. Skipped unless EMQ_ENGINE_URL names a scratch database
// (e.g. redis://:pw@127.0.0.1:6379/15): the test flushes that database.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { loadBundle } = require('../src/bundle');
const { Connector } = require('../src/connector');

const URL_ = process.env.EMQ_ENGINE_URL;
const skip = URL_ ? false : 'EMQ_ENGINE_URL is not set';
const bundle = loadBundle(path.resolve(__dirname, '..', '..', '..', 'bundle'));

async function admin() {
  const { loadRedis } = require('../src/engine');
  const c = loadRedis().createClient({ url: URL_ });
  c.on('error', () => {});
  await c.connect();
  return c;
}

test('fence install, a job round trip, SCRIPT FLUSH, and a killed connection', { skip }, async () => {
  const a = await admin();
  let c;
  try {
    await a.sendCommand(['FLUSHDB']);
    const logs = [];
    c = new Connector(bundle, { log: (l) => logs.push(l) });
    const call = (req) => c.handle({ session: 'w', ...req });
    assert.deepEqual(await call({ cmd: 'connect', url: URL_ }), {});
    const fence = await a.sendCommand(['HGETALL', 'emq:fence']);
    assert.deepEqual(fence, ['protocol', '1', 'bundle', '1.0.0', 'digest', bundle.digest]);

    assert.equal(await call({ cmd: 'enqueue', queue: 'q', payload: 'héllo\n', delay_ms: 0 }), 'j0000000000000001');
    await a.sendCommand(['SCRIPT', 'FLUSH']);
    assert.equal(await call({ cmd: 'enqueue', queue: 'q', payload: 'two', delay_ms: 0 }), 'j0000000000000002');
    assert.deepEqual(await call({ cmd: 'browse', queue: 'q', offset: 0, limit: 10 }), [
      { id: 'j0000000000000001', payload: 'héllo\n' },
      { id: 'j0000000000000002', payload: 'two' },
    ]);
    const job = await call({ cmd: 'claim', queue: 'q', lease_ms: 30000 });
    assert.deepEqual(job, { id: 'j0000000000000001', payload: 'héllo\n', attempts: 1 });
    assert.equal(await call({ cmd: 'complete', queue: 'q', id: job.id, attempts: 2 }), false);
    assert.equal(await call({ cmd: 'complete', queue: 'q', id: job.id, attempts: 1 }), true);
    assert.equal(await call({ cmd: 'pending_size', queue: 'q' }), 1);
    assert.deepEqual(await call({ cmd: 'pipeline_probe', key: 'probe', n: 5 }), [1, 2, 3, 4, 5]);
    assert.equal(await call({ cmd: 'batch', queue: 'b', n: 1000, depth: 300, payload: 'x' }), 1000);
    assert.equal(await a.sendCommand(['ZCARD', 'emq:{b}:pending']), 1000);

    // Kill the session's connection while idle: the next verb reconnects (fence read again).
    const id = await c.sessions.get('w').engine.client.sendCommand(['CLIENT', 'ID']);
    await a.sendCommand(['CLIENT', 'KILL', 'ID', String(id)]);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(await call({ cmd: 'pending_size', queue: 'q' }), 1);
    assert.ok(logs.some((l) => /connection lost/.test(l)), logs.join('\n'));

    // Kill it with a script call in flight: kind engine, and the call is not sent again.
    const engine = c.sessions.get('w').engine;
    const id2 = await engine.client.sendCommand(['CLIENT', 'ID']);
    await a.sendCommand(['CLIENT', 'PAUSE', '300', 'ALL']);
    const pending = call({ cmd: 'enqueue', queue: 'k', payload: 'once', delay_ms: 0 });
    await new Promise((r) => setTimeout(r, 50));
    await a.sendCommand(['CLIENT', 'KILL', 'ID', String(id2)]);
    await assert.rejects(pending, (e) => e.kind === 'engine');
    await new Promise((r) => setTimeout(r, 400));
    const seq = await a.sendCommand(['GET', 'emq:{k}:seq']);
    assert.ok(seq === null || seq === '1', `enqueue ran ${seq} times`);

    // Another protocol in the fence: connect fails with kind fence and no script is sent.
    await a.sendCommand(['HSET', 'emq:fence', 'protocol', '2']);
    await assert.rejects(call({ cmd: 'connect', url: URL_ }), (e) => e.kind === 'fence' && /2/.test(e.message) && /1/.test(e.message));
    await assert.rejects(call({ cmd: 'pending_size', queue: 'q' }), (e) => e.kind === 'invalid');
    await c.closeAll();
  } finally {
    if (c) await c.closeAll();
    await a.sendCommand(['FLUSHDB']);
    await a.disconnect();
  }
});
