'use strict';
// Cluster mode (SPEC §8) against a real Valkey Cluster: three primaries and three replicas on
// loopback, booted here (cluster mode, a password, no persistence, free ports, a temp dir) and
// killed at the end. As the harness does (R8.5), the nodes serve 16 databases and the session works
// in database 9 as a user allowed that one only (`db=9`), so a connection that did not select it
// (one opened after a MOVED, say) meets NOPERM. Binaries: $EMQ_VALKEY_SERVER (valkey-cli beside it), else
// ~/.cache/emq/valkey-9.1.2/bin; skipped when either is missing.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { spawn, execFileSync } = require('node:child_process');
const { loadBundle } = require('../src/bundle');
const { Connector } = require('../src/connector');
const { loadRedis, slotOf } = require('../src/engine');

const PASSWORD = 'pw';
const DB = 9; // the session's database; its user may use no other
const SERVER = process.env.EMQ_VALKEY_SERVER || path.join(os.homedir(), '.cache/emq/valkey-9.1.2/bin/valkey-server');
const CLI = path.join(path.dirname(SERVER), 'valkey-cli');
const usable = (f) => {
  try {
    fs.accessSync(f, fs.constants.X_OK);
    return fs.statSync(f).size > 0;
  } catch {
    return false;
  }
};
const skip = usable(SERVER) && usable(CLI) ? false : `no valkey-server/valkey-cli at ${SERVER} (set EMQ_VALKEY_SERVER)`;
const bundle = loadBundle(path.resolve(__dirname, '..', '..', '..', 'bundle'));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const free = (port) => new Promise((resolve) => {
  const s = net.createServer().once('error', () => resolve(false));
  s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
});

async function pickPorts() {
  for (let t = 0; t < 50; t++) {
    const base = 20000 + Math.floor(Math.random() * 25000);
    const ports = Array.from({ length: 6 }, (_, i) => base + i);
    let ok = true;
    for (const p of ports) if (!(await free(p)) || !(await free(p + 10000))) ok = false;
    if (ok) return ports;
  }
  throw new Error('no free ports for a cluster');
}

test('a connector session on a Valkey Cluster', { skip, timeout: 120_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'emq-nodecluster-'));
  const ports = await pickPorts();
  const servers = [];
  const admins = new Map();
  let connector;
  const admin = async (port) => {
    if (!admins.has(port)) {
      const c = loadRedis().createClient({ url: `redis://:${PASSWORD}@127.0.0.1:${port}/${DB}` });
      c.on('error', () => {});
      await c.connect();
      admins.set(port, c);
    }
    return admins.get(port);
  };
  const cmd = async (port, args) => (await admin(port)).sendCommand(args);
  const info = async (port, section) => {
    const out = {};
    for (const line of (await cmd(port, ['INFO', section])).split('\r\n')) {
      const i = line.indexOf(':');
      if (i > 0) out[line.slice(0, i)] = line.slice(i + 1);
    }
    return out;
  };
  const role = async (port) => (await info(port, 'replication')).role;
  const primaries = async () => {
    const out = [];
    for (const p of ports) if ((await role(p)) === 'master') out.push(p);
    return out;
  };
  const owner = async (key) => {
    const slot = slotOf(key);
    for (const [lo, hi, primary] of await cmd(ports[0], ['CLUSTER', 'SLOTS'])) if (lo <= slot && slot <= hi) return Number(primary[1]);
    throw new Error(`slot ${slot} not covered`);
  };
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
  const stat = async (port, name) => Number((/calls=(\d+)/.exec((await info(port, 'commandstats'))[`cmdstat_${name}`] || '') || [0, 0])[1]);

  try {
    for (const p of ports) {
      servers.push(spawn(SERVER, ['--port', String(p), '--bind', '127.0.0.1', '--cluster-enabled', 'yes',
        '--cluster-databases', '16', '--requirepass', PASSWORD, '--masterauth', PASSWORD, '--save', '', '--appendonly', 'no',
        '--cluster-config-file', path.join(dir, `nodes-${p}.conf`), '--dir', dir,
        '--logfile', path.join(dir, `valkey-${p}.log`)], { stdio: 'ignore' }));
    }
    for (const p of ports) await waitFor(`node ${p}`, async () => (await cmd(p, ['PING'])) === 'PONG', 10_000);
    // The connector's user (on every node: ACLs are not replicated), database 9 only.
    for (const p of ports) await cmd(p, ['ACL', 'SETUSER', 'emq', 'on', `>${PASSWORD}`, '~*', '&*', '+@all', `db=${DB}`]);
    execFileSync(CLI, ['-a', PASSWORD, '--no-auth-warning', '--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`),
      '--cluster-replicas', '1', '--cluster-yes'], { stdio: 'ignore', timeout: 60_000 });
    await waitFor('cluster_state:ok everywhere', async () => {
      for (const p of ports) if (!(await cmd(p, ['CLUSTER', 'INFO'])).includes('cluster_state:ok')) return false;
      return true;
    });
    await waitFor('three primaries with a replica each', async () => {
      const ps = await primaries();
      if (ps.length !== 3) return false;
      for (const p of ps) if ((await info(p, 'replication')).connected_slaves !== '1') return false;
      return true;
    });

    // Four queues per primary.
    const byNode = new Map();
    for (let i = 0; [...byNode.values()].filter((v) => v.length >= 4).length < 3; i++) {
      const o = await owner(`emq:{q${i}}:pending`);
      if (!byNode.has(o)) byNode.set(o, []);
      byNode.get(o).push(`q${i}`);
    }
    const twelve = [...byNode.values()].flatMap((v) => v.slice(0, 4));
    const three = [...byNode.values()].map((v) => v[0]);

    connector = new Connector(bundle, { log: () => {} });
    const call = (req) => connector.handle({ session: 's', ...req });
    const seed = `redis://emq:${PASSWORD}@127.0.0.1:${ports[0]}/${DB}`;
    assert.deepEqual(await call({ cmd: 'connect', url: seed, cluster: true }), {});

    await t.test('a database the engine refuses fails connect with kind engine, its words (R8.5)', async () => {
      for (const [db, words] of [[16, /DB index is out of range/], [3, /NOPERM/]]) {
        const other = connector.handle({ cmd: 'connect', session: `db${db}`, url: seed.replace(/\/\d+$/, `/${db}`), cluster: true });
        await assert.rejects(other, (e) => e.kind === 'engine' && words.test(e.message));
      }
    });

    await t.test('the fence lives on its own node', async () => {
      const fence = await cmd(await owner('emq:fence'), ['HGETALL', 'emq:fence']);
      assert.deepEqual(fence, ['protocol', '1', 'bundle', '1.0.0', 'digest', bundle.digest]);
    });

    await t.test('verbs on every primary', async () => {
      for (const q of three) {
        const id = await call({ cmd: 'enqueue', queue: q, payload: `hi ${q}`, delay_ms: 0 });
        const job = await call({ cmd: 'claim', queue: q, lease_ms: 30_000 });
        assert.deepEqual(job, { id, payload: `hi ${q}`, attempts: 1 });
        assert.equal(await call({ cmd: 'complete', queue: q, id, attempts: 1 }), true);
        assert.equal(await call({ cmd: 'pending_size', queue: q }), 0);
      }
    });

    await t.test('a batch over twelve queues is split by node and pipelined; the probe too', async () => {
      for (const p of await primaries()) await cmd(p, ['CONFIG', 'RESETSTAT']);
      const n = 24_000;
      assert.equal(await call({ cmd: 'batch', queue: twelve[0], n, depth: 1000, payload: 'b', queues: twelve }), n);
      for (const q of twelve) assert.equal(await cmd(await owner(`emq:{${q}}:pending`), ['ZCARD', `emq:{${q}}:pending`]), n / 12);
      for (const p of await primaries()) {
        const reads = Number((await info(p, 'stats')).total_reads_processed);
        assert.ok(reads < n / 3 / 10, `primary ${p}: ${reads} reads for ${n / 3} enqueues`);
      }
      const probe = await call({ cmd: 'pipeline_probe', key: 'probe', n: 10_000 });
      assert.deepEqual(probe, Array.from({ length: 10_000 }, (_, i) => i + 1));
    });

    await t.test('after SCRIPT FLUSH on every primary, each node loads each script it runs once', async () => {
      for (const p of await primaries()) {
        await cmd(p, ['SCRIPT', 'FLUSH']);
        await cmd(p, ['CONFIG', 'RESETSTAT']);
      }
      for (const q of three) {
        await call({ cmd: 'enqueue', queue: q, payload: 'x', delay_ms: 0 });
        await call({ cmd: 'claim', queue: q, lease_ms: 0 });
        assert.equal(await call({ cmd: 'reap', queue: q, max_attempts: 5, limit: 10 }), 1);
      }
      assert.equal(await call({ cmd: 'batch', queue: twelve[0], n: 1200, depth: 100, payload: 'b', queues: twelve }), 1200);
      for (const p of await primaries()) assert.equal(await stat(p, 'script|load'), 3, `primary ${p}`);
    });

    await t.test('a CLUSTER FAILOVER between verbs: MOVED is followed, nothing runs twice', async () => {
      const q = three[0];
      const before = Number(await cmd(await owner(`emq:{${q}}:pending`), ['GET', `emq:{${q}}:seq`]));
      const old = await owner(`emq:{${q}}:pending`);
      let replica;
      for (const p of ports) {
        const r = await info(p, 'replication');
        if (r.role === 'slave' && Number(r.master_port) === old) replica = p;
      }
      assert.ok(replica, `a replica of ${old}`);
      // The premise of "nothing lost": the replica holds every write first. On a loaded machine its
      // link may still be syncing, and a failover then promotes an empty node.
      await waitFor('the replica in sync', async () => {
        const r = await info(replica, 'replication');
        const m = await info(old, 'replication');
        return r.master_link_status === 'up' && Number(r.slave_repl_offset) >= Number(m.master_repl_offset);
      }, 60_000);
      // A manual failover gives up after cluster-node-timeout on a busy machine: ask up to 3 times.
      let done = false;
      for (let attempt = 0; attempt < 3 && !done; attempt++) {
        assert.equal(await cmd(replica, ['CLUSTER', 'FAILOVER']), 'OK');
        done = await waitFor('the failover', async () => (await role(replica)) === 'master' && (await role(old)) === 'slave', 15_000)
          .then(() => true, () => false);
      }
      if (!done) {
        const log = fs.readFileSync(path.join(dir, `valkey-${replica}.log`), 'utf8').split('\n').slice(-15).join('\n');
        throw new Error(`no failover of ${old} to ${replica}; the replica's log:\n${log}`);
      }
      await waitFor('the new owner', async () => (await owner(`emq:{${q}}:pending`)) === replica);
      // What the promoted node holds is the engine's doing, not the connector's: a loaded CI run once
      // promoted a replica whose counter was gone though its offset had caught up. The connector is
      // judged from what the new primary holds (its log goes with the note when that differs).
      const held = Number(await cmd(replica, ['GET', `emq:{${q}}:seq`]));
      if (held !== before) {
        const log = fs.readFileSync(path.join(dir, `valkey-${replica}.log`), 'utf8').split('\n').slice(-20).join('\n');
        t.diagnostic(`the promoted node holds seq ${held}, the old primary held ${before}; its log:\n${log}`);
      }
      const id = await call({ cmd: 'enqueue', queue: q, payload: 'after', delay_ms: 0 });
      assert.equal(id, `j${String(held + 1).padStart(16, '0')}`);
      assert.equal(await call({ cmd: 'batch', queue: twelve[0], n: 1200, depth: 100, payload: 'b', queues: twelve }), 1200);
      assert.equal(await cmd(replica, ['GET', `emq:{${q}}:seq`]), String(held + 1 + (twelve.includes(q) ? 100 : 0)));
      assert.ok(/count=[1-9]/.test((await info(old, 'errorstats')).errorstat_MOVED || ''), 'the old primary answered MOVED');
    });

    await t.test('every key the session wrote is in its database, on every primary (R8.5)', async () => {
      for (const p of await primaries()) {
        const keyspace = Object.keys(await info(p, 'keyspace'));
        assert.deepEqual(keyspace, [`db${DB}`], `primary ${p}: ${keyspace}`);
      }
    });

    await t.test('disconnect closes every connection of the session', async () => {
      const ours = async () => {
        let n = 0;
        for (const p of ports) {
          const me = await cmd(p, ['CLIENT', 'ID']);
          for (const line of (await cmd(p, ['CLIENT', 'LIST'])).trim().split('\n')) {
            if (/ flags=N /.test(line) && !line.startsWith(`id=${me} `)) n++;
          }
        }
        return n;
      };
      assert.ok((await ours()) >= 3);
      assert.deepEqual(await call({ cmd: 'disconnect' }), {});
      await waitFor("the connector's connections to close", async () => (await ours()) === 0, 5000);
    });
  } finally {
    if (connector) await connector.closeAll();
    for (const c of admins.values()) await c.disconnect().catch(() => {});
    for (const s of servers) s.kill('SIGKILL');
    await Promise.all(servers.map((s) => (s.exitCode !== null || s.signalCode !== null ? null : new Promise((r) => s.once('exit', r)))));
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
