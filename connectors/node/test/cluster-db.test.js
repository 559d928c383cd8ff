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
const { loadBundle, sha1 } = require('../src/bundle');
const { clusterDefaults, slotOf, queueKey, FENCE_KEY } = require('../src/engine');
const { OK, fakeServer, redisAvailable } = require('./fake-resp');

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

// ---- fake cluster nodes ---------------------------------------------------------------------------

const DATABASES = 16; // cluster-databases
const ALLOWED_DB = 9; // the user's db=9
const KEYED = new Set(['HGETALL', 'HSETNX', 'EVALSHA', 'ZCARD', 'ZRANGE', 'HGET', 'INCR']);

/**
 * A cluster of fake primaries sharing one slot map: `owner` (slot -> node, else `home`), `ask`
 * (slot -> node a migration sends it to), `listed` (the nodes CLUSTER NODES names). Each node keeps
 * every connection's commands in order (`conns[i].log`) and its own data and script cache.
 */
async function fakeCluster(n) {
  const world = { nodes: [], owner: new Map(), ask: new Map(), listed: new Set() };
  const ownerOf = (slot) => world.owner.get(slot) ?? world.home;
  world.clusterNodes = () => {
    let text = '';
    for (const node of world.listed) {
      const slots = [];
      let from = -1;
      for (let s = 0; s <= 16384; s++) {
        const mine = s < 16384 && ownerOf(s) === node;
        if (mine && from < 0) from = s;
        if (!mine && from >= 0) {
          slots.push(from === s - 1 ? String(from) : `${from}-${s - 1}`);
          from = -1;
        }
      }
      text += `${node.id} ${node.address}@${node.port + 10000} master - 0 0 1 connected ${slots.join(' ')}`.trimEnd() + '\n';
    }
    return text;
  };
  for (let i = 0; i < n; i++) {
    const node = { id: `${'n'.repeat(39)}${i}`, conns: [], data: new Map(), scripts: new Set(), ran: [], databases: DATABASES };
    const serve = (args, conn) => {
      const cmd = args[0].toUpperCase();
      if (cmd === 'AUTH') {
        conn.authed = args[1] === 'emq' && args[2] === 'pw';
        return conn.authed ? OK : new Error('WRONGPASS invalid username-password pair or user is disabled.');
      }
      if (!conn.authed) return new Error('NOAUTH Authentication required.');
      if (cmd === 'SELECT') {
        const db = Number(args[1]);
        if (!(db >= 0 && db < node.databases)) return new Error('ERR DB index is out of range');
        if (db !== ALLOWED_DB) return new Error('NOPERM No permissions to access database');
        conn.db = db;
        return OK;
      }
      if (cmd === 'CLUSTER' && args[1].toUpperCase() === 'NODES') return world.clusterNodes();
      if (cmd === 'ASKING') { conn.asking = true; return OK; }
      if (cmd === 'SCRIPT' && args[1].toUpperCase() === 'LOAD') { const sha = sha1(args[2]); node.scripts.add(sha); return sha; }
      if (cmd === 'MULTI') { conn.multi = []; return OK; }
      if (cmd === 'EXEC') { const q = conn.multi; conn.multi = null; return q.map((a) => serve(a, conn)); }
      if (!KEYED.has(cmd)) return new Error(`ERR unknown command '${args[0]}'`);
      if (conn.db !== ALLOWED_DB) return new Error('NOPERM No permissions to access database');
      const key = cmd === 'EVALSHA' ? args[3] : args[1];
      const slot = slotOf(key);
      const asking = conn.asking;
      conn.asking = false;
      // A slot in migration: its keys are on the target, which serves them after ASKING only.
      const target = world.ask.get(slot);
      if (target && target !== node && ownerOf(slot) === node) return new Error(`ASK ${slot} ${target.address}`);
      if (!(target === node ? asking : ownerOf(slot) === node)) return new Error(`MOVED ${slot} ${ownerOf(slot).address}`);
      if (conn.multi) { conn.multi.push(args); return { status: 'QUEUED' }; }
      if (cmd === 'HGETALL') return [...(node.data.get(key) ?? new Map())].flat();
      if (cmd === 'HSETNX') {
        if (!node.data.has(key)) node.data.set(key, new Map());
        const h = node.data.get(key);
        if (h.has(args[2])) return 0;
        h.set(args[2], args[3]);
        return 1;
      }
      if (cmd === 'EVALSHA') {
        if (!node.scripts.has(args[1])) return new Error('NOSCRIPT No matching script. Please use EVAL.');
        node.ran.push({ db: conn.db, key });
        return `j${String(node.ran.length).padStart(16, '0')}`;
      }
      return 0; // ZCARD and the like: an empty queue
    };
    // Each connection's record gets the node's state and its command log.
    const srv = await fakeServer((args, conn) => {
      conn.log.push(args[0].toUpperCase() === 'SELECT' ? `SELECT ${args[1]}` : args[0].toUpperCase());
      return serve(args, conn);
    }, { onConnection: (conn) => node.conns.push(Object.assign(conn, { db: 0, asking: false, multi: null, log: [] })) });
    // `sockets`: the open ones, which a test destroys to lose a connection.
    Object.assign(node, { port: srv.port, address: srv.address, sockets: srv.conns, close: srv.close });
    world.nodes.push(node);
  }
  world.home = world.nodes[0];
  world.listed.add(world.home);
  world.close = () => Promise.all(world.nodes.map((node) => node.close()));
  return world;
}

/** Every connection a node saw, each as its commands in order. */
const connLogs = (world) => world.nodes.flatMap((node) => node.conns.map((c) => ({ node: node.address, log: c.log })));

/** R8.5: every connection began AUTH, SELECT <db>, before anything else. */
function assertEverySelected(world, db) {
  for (const { node, log } of connLogs(world)) {
    assert.deepEqual(log.slice(0, 2), ['AUTH', `SELECT ${db}`], `a connection to ${node} began ${JSON.stringify(log.slice(0, 4))}`);
  }
}

const waitFor = async (what, check, ms = 5000) => {
  for (const deadline = Date.now() + ms; Date.now() < deadline;) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
};

/** A queue whose slot is neither the fence's nor one of `taken`. */
function queueOff(...taken) {
  for (let i = 0; ; i++) {
    const slot = slotOf(queueKey(`q${i}`, 'pending'));
    if (slot !== slotOf(FENCE_KEY) && !taken.includes(slot)) return { queue: `q${i}`, slot };
  }
}

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
