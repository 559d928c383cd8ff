'use strict';
// Behind Sentinel (SPEC §11) against real Valkey: a primary, a replica and three Sentinels on
// loopback, booted here (no persistence, free ports, a temp dir) and killed at the end. The
// connector's user `emq` holds on each Sentinel only what R11.4 lists, and on the data nodes only
// what R4.19 lists; the ACL LOG of every server must stay empty of it. Checks discovery past a
// refusing first Sentinel, ROLE, the fence, and a `SENTINEL FAILOVER` under a working and an idle
// session (R11.3). Binaries: $EMQ_VALKEY_SERVER, else ~/.cache/emq/valkey-9.1.2/bin; skipped
// when missing.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { loadBundle } = require('../src/bundle');
const { Connector } = require('../src/connector');

const PASSWORD = 'pw';
const SERVER = process.env.EMQ_VALKEY_SERVER || path.join(os.homedir(), '.cache/emq/valkey-9.1.2/bin/valkey-server');
const usable = (f) => {
  try {
    fs.accessSync(f, fs.constants.X_OK);
    return fs.statSync(f).size > 0;
  } catch {
    return false;
  }
};
let redis = null;
try {
  redis = require('../src/engine').loadRedis();
} catch {
  // skipped below
}
const skip = !redis ? 'node-redis is not installed' : usable(SERVER) ? false : `no valkey-server at ${SERVER} (set EMQ_VALKEY_SERVER)`;
const bundle = loadBundle(path.resolve(__dirname, '..', '..', '..', 'bundle'));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

const DATA_ACL = 'user emq on >pw ~* resetchannels -@all +auth +hello +ping +client|setname +client|setinfo +role +select '
  + '+evalsha +script|load +zrange +zcard +hget +hmget +hgetall +hsetnx +multi +exec +discard +incr'
  + ' +del +hincrby +hset +time +zadd +zpopmin +zrem +zscore'; // the scripts' own commands
const SENTINEL_ACL = 'user emq on >pw resetchannels &+switch-master -@all +auth +hello +ping +client|setname +client|setinfo '
  + '+sentinel|get-master-addr-by-name +sentinel|get-primary-addr-by-name +sentinel|sentinels +subscribe +psubscribe +unsubscribe +punsubscribe';

test('a connector session behind Sentinel, through a SENTINEL FAILOVER', { skip, timeout: 120_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'emq-nodesentinel-'));
  const procs = [];
  const admins = new Map();
  let connector;
  const admin = async (port) => {
    if (!admins.has(port)) {
      const c = redis.createClient({ url: `redis://admin:${PASSWORD}@127.0.0.1:${port}`, socket: { reconnectStrategy: false } });
      c.on('error', () => {});
      await c.connect();
      admins.set(port, c);
    }
    return admins.get(port);
  };
  const cmd = async (port, args) => (await admin(port)).sendCommand(args);
  const waitFor = async (what, check, ms = 30_000) => {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      try {
        if (await check()) return;
      } catch {
        // not yet
      }
      await sleep(100);
    }
    throw new Error(`timed out waiting for ${what}`);
  };
  t.after(async () => {
    if (connector) await connector.closeAll();
    for (const c of admins.values()) await c.disconnect().catch(() => {});
    for (const p of procs) p.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const [p1, p2, s1, s2, s3, dead] = await Promise.all(Array.from({ length: 6 }, freePort));
  const adminUser = `user admin on >${PASSWORD} ~* &* +@all`;
  for (const [port, replicaOf] of [[p1, null], [p2, p1]]) {
    const conf = path.join(dir, `data-${port}.conf`);
    fs.writeFileSync(conf, [
      `port ${port}`, 'bind 127.0.0.1', 'save ""', 'appendonly no', `dir ${dir}`, `logfile ${path.join(dir, `data-${port}.log`)}`,
      'user default off', adminUser, DATA_ACL, 'masteruser admin', `masterauth ${PASSWORD}`,
      ...(replicaOf ? [`replicaof 127.0.0.1 ${replicaOf}`] : []), '',
    ].join('\n'));
    procs.push(spawn(SERVER, [conf], { stdio: 'ignore' }));
  }
  for (const port of [s1, s2, s3]) {
    const conf = path.join(dir, `sentinel-${port}.conf`);
    fs.writeFileSync(conf, [
      `port ${port}`, 'bind 127.0.0.1', `dir ${dir}`, `logfile ${path.join(dir, `sentinel-${port}.log`)}`,
      `sentinel monitor emq 127.0.0.1 ${p1} 2`, 'sentinel auth-user emq admin', `sentinel auth-pass emq ${PASSWORD}`,
      'sentinel down-after-milliseconds emq 2000', 'sentinel failover-timeout emq 10000',
      `sentinel sentinel-user admin`, `sentinel sentinel-pass ${PASSWORD}`,
      'user default off', adminUser, SENTINEL_ACL, '',
    ].join('\n'));
    procs.push(spawn(SERVER, [conf, '--sentinel'], { stdio: 'ignore' }));
  }
  for (const port of [p1, p2, s1, s2, s3]) await waitFor(`server ${port}`, async () => (await cmd(port, ['PING'])) === 'PONG', 10_000);
  await waitFor('every Sentinel sees the replica and the two other Sentinels', async () => {
    for (const s of [s1, s2, s3]) {
      const replicas = await cmd(s, ['SENTINEL', 'REPLICAS', 'emq']);
      if (replicas.length !== 1) return false;
      const fields = replicas[0];
      if (fields[fields.indexOf('flags') + 1] !== 'slave') return false;
      if ((await cmd(s, ['SENTINEL', 'SENTINELS', 'emq'])).length !== 2) return false;
    }
    return true;
  });

  connector = new Connector(bundle);
  const nodes = [`127.0.0.1:${dead}`, `127.0.0.1:${s1}`, `127.0.0.1:${s2}`, `127.0.0.1:${s3}`];
  const connect = (session) => connector.handle({ cmd: 'connect', session, url: `redis://emq:${PASSWORD}@${nodes[0]}/4`, sentinel: { name: 'emq', nodes } });
  const enqueue = (session) => connector.handle({ cmd: 'enqueue', session, queue: 'q', payload: 'p', delay_ms: 0 });
  // A fresh client per command on a data node: Sentinel kills the normal clients of both nodes of a failover.
  const once = async (port, args, db = 0) => {
    const c = redis.createClient({ url: `redis://admin:${PASSWORD}@127.0.0.1:${port}/${db}`, socket: { reconnectStrategy: false } });
    c.on('error', () => {});
    await c.connect();
    try {
      return await c.sendCommand(args);
    } finally {
      await c.disconnect().catch(() => {});
    }
  };
  const pending = (port) => once(port, ['ZCARD', 'emq:{q}:pending'], 4);

  await connect('work');
  await connect('idle');
  for (let i = 0; i < 3; i++) await enqueue('work');
  assert.equal(await pending(p1), 3, 'the scripts ran on the primary, in the url\'s database');

  // The failover: the replica becomes the primary; every Sentinel names it.
  await waitFor('SENTINEL FAILOVER accepted', async () => (await cmd(s1, ['SENTINEL', 'FAILOVER', 'emq'])) === 'OK', 20_000);
  await waitFor('every Sentinel names the new primary', async () => {
    for (const s of [s1, s2, s3]) if (Number((await cmd(s, ['SENTINEL', 'GET-MASTER-ADDR-BY-NAME', 'emq']))[1]) !== p2) return false;
    return (await once(p2, ['ROLE']))[0] === 'master';
  });
  // The old primary stays a primary (and takes writes) until Sentinel reconfigures it a moment later.
  await waitFor('the old primary is a replica', async () => (await once(p1, ['ROLE']))[0] === 'slave');

  for (const session of ['work', 'idle']) {
    const outcomes = [];
    for (let i = 0; i < 3; i++) outcomes.push(await enqueue(session).then(() => 'ok', (e) => e.kind));
    const first = outcomes.indexOf('ok');
    assert.ok(first >= 0, `${session}: one of the next three calls succeeds (${outcomes})`);
    assert.ok(outcomes.slice(first).every((o) => o === 'ok'), `${session}: every call after the first success succeeds (${outcomes})`);
    t.diagnostic(`${session} after the failover: ${outcomes.join(', ')}`);
  }
  await waitFor('the new primary holds the jobs', async () => (await pending(p2)) >= 5, 5_000);

  await connector.handle({ cmd: 'disconnect', session: 'work' });
  await connector.handle({ cmd: 'disconnect', session: 'idle' });
  for (const port of [p1, p2, s1, s2, s3]) {
    const log = (await ([s1, s2, s3].includes(port) ? cmd : once)(port, ['ACL', 'LOG'])).map((entry) => {
      const e = {};
      for (let i = 0; i + 1 < entry.length; i += 2) e[entry[i]] = entry[i + 1];
      return e;
    }).filter((e) => e.username === 'emq');
    assert.deepEqual(log.map((e) => `${e.reason} ${e.object}`), [], `ACL LOG of ${port}`);
  }
  await waitFor('no connection of the connector left on any server', async () => {
    for (const port of [p1, p2, s1, s2, s3]) if ((await ([s1, s2, s3].includes(port) ? cmd : once)(port, ['CLIENT', 'LIST'])).split('\n').some((l) => / user=emq /.test(l))) return false;
    return true;
  }, 5_000);
});
