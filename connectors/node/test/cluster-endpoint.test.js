'use strict';
// An unknown endpoint (SPEC R8.13), no engine needed: a cluster with
// `cluster-preferred-endpoint-type unknown-endpoint` names no host in its redirects
// (`MOVED 12 :7001`, `ASK 12 :7001`). The unnamed host is the host of the node that sent the
// redirect; the connector follows it there and never dials the empty host.
//
// The fake nodes (./fake-cluster, on ./fake-resp's server) listen on 127.0.0.2 only: a client that
// dialled the empty host (the local machine: `localhost`, 127.0.0.1 or ::1) would find nothing
// there, and the call would fail. Their CLUSTER NODES names every node by its IP, as Valkey's
// always does (discovery never meets an empty host on this connector: node-redis reads CLUSTER
// NODES, not CLUSTER SLOTS).
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { Connector } = require('../src/connector');
const { loadBundle } = require('../src/bundle');
const { queueKey } = require('../src/engine');
const { redisAvailable } = require('./fake-resp');
const { fakeCluster, assertEverySelected, queueOff } = require('./fake-cluster');

const bundle = loadBundle(path.resolve(__dirname, '..', '..', '..', 'bundle'));
const live = { skip: redisAvailable ? false : 'node-redis is not installed', timeout: 20_000 };
const HOST = '127.0.0.2';
const JOB = /^j\d{16}$/;

/** A connector with one cluster session on `world`'s first node, database 9. */
async function connected(world) {
  const connector = new Connector(bundle, { log: () => {} });
  const call = (req) => connector.handle({ session: 's', ...req });
  assert.deepEqual(await call({ cmd: 'connect', url: `redis://emq:pw@${world.nodes[0].address}/9`, cluster: true }), {});
  const enqueue = (queue) => call({ cmd: 'enqueue', queue, payload: 'p', delay_ms: 0 });
  return { connector, call, enqueue };
}

/** Every command `node`'s connections received after the first `from` of each (by connection). */
const sentTo = (node) => node.conns.map((c) => c.log.filter((x) => !['AUTH', 'CLUSTER'].includes(x) && !x.startsWith('SELECT')));

test('R8.13: ASK with an empty host goes to the answering node\'s host: ASKING, then the call there', live, async () => {
  const world = await fakeCluster(3, { host: HOST });
  const [a, b, c] = world.nodes;
  world.unknownEndpoint = true;
  world.listed.add(b);
  const { connector, enqueue } = await connected(world);
  try {
    // A target the session already has a connection to: `ASK <slot> :<port b>` from a (on
    // 127.0.0.2) names 127.0.0.2:<port b>, that connection.
    const known = queueOff();
    world.ask.set(known.slot, b);
    const bConns = b.conns.length;
    assert.match(await enqueue(known.queue), JOB);
    assert.deepEqual(b.ran, [{ db: 9, key: queueKey(known.queue, 'pending') }]);
    assert.equal(b.conns.length, bConns, 'b was reached over the connection the session had');
    const onB = sentTo(b).flat();
    assert.deepEqual(onB.slice(-5), ['ASKING', 'EVALSHA', 'SCRIPT', 'ASKING', 'EVALSHA'], onB.join(' '));
    assert.equal(a.ran.length, 0, 'the call did not run on the source');

    // A target the session has no connection to yet (not in the map it read at connect): found
    // by node-redis's rediscovery, then ASKING and the call there.
    const fresh = queueOff(known.slot);
    world.listed.add(c);
    world.ask.set(fresh.slot, c);
    assert.match(await enqueue(fresh.queue), JOB);
    assert.deepEqual(c.ran, [{ db: 9, key: queueKey(fresh.queue, 'pending') }]);
    const onC = sentTo(c).flat();
    assert.deepEqual(onC.slice(-5), ['ASKING', 'EVALSHA', 'SCRIPT', 'ASKING', 'EVALSHA'], onC.join(' '));

    // A batch whose calls all meet the empty-host ASK: each goes to b after its own ASKING.
    const r = await connector.handle({ session: 's', cmd: 'batch', queue: known.queue, n: 3, depth: 3, payload: 'p' });
    assert.equal(b.ran.length, 4, JSON.stringify(r));
    assert.equal(a.ran.length, 0);
    assertEverySelected(world, 9);
  } finally {
    await connector.closeAll();
    await world.close();
  }
});

test('R8.13: MOVED with an empty host is followed, and so is an empty-host ASK after it', live, async () => {
  const world = await fakeCluster(3, { host: HOST });
  const [a, b, c] = world.nodes;
  world.unknownEndpoint = true;
  const { connector, enqueue } = await connected(world);
  try {
    // `MOVED <slot> :<port b>` for a slot now on b, a node the session has not met.
    const moved = queueOff();
    world.listed.add(b);
    world.owner.set(moved.slot, b);
    assert.match(await enqueue(moved.queue), JOB);
    assert.deepEqual(b.ran, [{ db: 9, key: queueKey(moved.queue, 'pending') }]);
    // The next call goes straight to b, by the map that MOVED refreshed.
    const before = sentTo(a).flat().length;
    assert.match(await enqueue(moved.queue), JOB);
    assert.equal(b.ran.length, 2);
    assert.equal(sentTo(a).flat().length, before, 'nothing more went to a');

    // A chain (R8.12): the slot moved to b, which is migrating it to c: `MOVED :<port b>` from
    // a, then `ASK :<port c>` from b, both without a host.
    const chained = queueOff(moved.slot);
    world.listed.add(c);
    world.owner.set(chained.slot, b);
    world.ask.set(chained.slot, c);
    assert.match(await enqueue(chained.queue), JOB);
    assert.deepEqual(c.ran, [{ db: 9, key: queueKey(chained.queue, 'pending') }]);
    assert.equal(a.ran.length + b.ran.length, 2, 'the chained call ran on c only');
    assertEverySelected(world, 9);
  } finally {
    await connector.closeAll();
    await world.close();
  }
});
