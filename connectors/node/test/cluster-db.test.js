'use strict';
// A database on a cluster (SPEC R8.5), no engine needed: the url's database reaches node-redis's
// per-node options (clusterDefaults), and, against fake RESP cluster nodes on loopback, every
// connection the session opens (the seed's discovery client, each node client of the slot map, a
// node first met by MOVED or by ASK, every one opened again after a lost connection) sends
// `SELECT <db>` right after AUTH and before anything else. The nodes model Valkey 9 with
// `cluster-databases 16` and a user allowed database 9 only (`db=9`): a keyed command in another
// database is `NOPERM`, a SELECT past 15 is `ERR DB index is out of range`.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { Connector } = require('../src/connector');
const { loadBundle } = require('../src/bundle');
const { clusterDefaults, queueKey, FENCE_KEY } = require('../src/engine');
const { redisAvailable } = require('./fake-resp');
const { fakeCluster, connLogs, assertEverySelected, queueOff } = require('./fake-cluster');

const bundle = loadBundle(path.resolve(__dirname, '..', '..', '..', 'bundle'));
const live = { skip: redisAvailable ? false : 'node-redis is not installed', timeout: 20_000 };

test('clusterDefaults: the url\'s user, password and database go to every node client', () => {
  const d = clusterDefaults('redis://emq:p%40ss@127.0.0.1:7000/9');
  assert.equal(d.database, 9);
  assert.equal(d.username, 'emq');
  assert.equal(d.password, 'p@ss');
  assert.equal(d.disableOfflineQueue, true);
  assert.ok(d.socket.reconnectStrategy() instanceof Error, 'node-redis never reconnects by itself');
  assert.equal(clusterDefaults('rediss://emq:pw@localhost:7000/16').database, 16, 'never judged here');
  assert.equal(clusterDefaults('rediss://emq:pw@localhost:7000/16').socket.tls, true);
  // Database 0 needs no SELECT: node-redis sends none when `database` is absent.
  for (const url of ['redis://:pw@h:1', 'redis://:pw@h:1/', 'redis://:pw@h:1/0']) assert.equal(clusterDefaults(url).database, undefined, url);
});

const waitFor = async (what, check, ms = 5000) => {
  for (const deadline = Date.now() + ms; Date.now() < deadline;) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
};

test('R8.5: the seed, a MOVED target, an ASK target and every replacement connection select the url\'s database', live, async () => {
  const world = await fakeCluster(3);
  const [a, b, c] = world.nodes;
  const connector = new Connector(bundle, { log: () => {} });
  const call = (req) => connector.handle({ session: 's', ...req });
  const enqueue = (queue) => call({ cmd: 'enqueue', queue, payload: 'p', delay_ms: 0 });
  try {
    // The seed: its discovery client and its node client; the fence is installed in database 9.
    assert.deepEqual(await call({ cmd: 'connect', url: `redis://emq:pw@${a.address}/9`, cluster: true }), {});
    assert.ok(a.conns.length >= 2, 'a discovery connection and a node connection on the seed');
    assert.deepEqual([...a.data.get(FENCE_KEY).keys()], ['protocol', 'bundle', 'digest']);
    assert.equal(b.conns.length + c.conns.length, 0);

    // MOVED to a node the session has no connection to yet: node-redis reads the map again and
    // opens one (RedisClusterSlots #initiateClientForNode, from `defaults`).
    const moved = queueOff();
    world.listed.add(b);
    world.owner.set(moved.slot, b);
    assert.match(await enqueue(moved.queue), /^j\d{16}$/);
    assert.deepEqual(b.ran, [{ db: 9, key: queueKey(moved.queue, 'pending') }]);

    // ASK to a node not in the map the session read: found by node-redis's rediscovery, then
    // ASKING and the call there (after a SCRIPT LOAD on it).
    const asked = queueOff(moved.slot);
    world.listed.add(c);
    world.ask.set(asked.slot, c);
    assert.match(await enqueue(asked.queue), /^j\d{16}$/);
    assert.deepEqual(c.ran, [{ db: 9, key: queueKey(asked.queue, 'pending') }]);
    assertEverySelected(world, 9);

    // A connection the engine closes: the session is opened again on the next verb, every new
    // connection (to every node) selecting database 9 before the fence read and the script.
    const before = world.nodes.map((node) => node.conns.length);
    for (const s of b.sockets) s.destroy();
    await waitFor('the session to see the loss', () => !connector.sessions.get('s').engine?.alive);
    assert.match(await enqueue(moved.queue), /^j\d{16}$/);
    world.nodes.forEach((node, i) => assert.ok(node.conns.length > before[i], `a new connection to ${node.address}`));
    assert.equal(b.ran.length, 2);
    assertEverySelected(world, 9);
    for (const { log } of connLogs(world)) assert.ok(!log.includes('SELECT 0'));
  } finally {
    await connector.closeAll();
    await world.close();
  }
});

test('R8.5: a database the engine refuses fails connect with kind engine and its words; nothing else is sent', live, async () => {
  const world = await fakeCluster(2);
  const [a, b] = world.nodes;
  world.listed.add(b);
  const connector = new Connector(bundle, { log: () => {} });
  const connect = (db) => connector.handle({ cmd: 'connect', session: 's', url: `redis://emq:pw@${a.address}/${db}`, cluster: true });
  const failure = (p) => p.then(() => assert.fail('connect succeeded'), (e) => e);
  try {
    for (const [db, words] of [[16, /ERR DB index is out of range/], [3, /NOPERM No permissions to access database/]]) {
      const e = await failure(connect(db));
      assert.equal(e.kind, 'engine', `/${db}: ${e.message}`);
      assert.match(e.message, words);
    }
    // The seed accepts database 9, another node serves fewer databases: node-redis's connect says
    // only that no root node was usable; the engine's words are still the error's.
    b.databases = 4;
    const e = await failure(connect(9));
    assert.equal(e.kind, 'engine', e.message);
    assert.match(e.message, /ERR DB index is out of range/);
    for (const { node, log } of connLogs(world)) {
      assert.deepEqual(log.filter((x) => !['AUTH', 'CLUSTER'].includes(x) && !x.startsWith('SELECT')), [], `${node}: ${log}`);
    }
    assert.equal(connector.sessions.size, 0, 'no session after a refused connect');
  } finally {
    await connector.closeAll();
    await world.close();
  }
});
