'use strict';
// Behind Sentinel (SPEC §11), no engine needed: `sentinel` validation, and discovery, ROLE, the
// fence and R11.3's re-resolve against fake RESP servers on loopback (Sentinels that refuse, stay
// silent, know no name, name a replica; data nodes with a role, a fence and a script cache). Every
// command each server receives is recorded, so R11.4 (what a Sentinel may be asked) and R11.2
// (nothing but AUTH and ROLE on a node that is not the primary) are checked to the command.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { Connector } = require('../src/connector');
const { loadBundle, sha1 } = require('../src/bundle');
const { parseHostPort, FENCE_KEY } = require('../src/engine');
const { OK, fakeServer, redisAvailable } = require('./fake-resp');

const bundle = loadBundle(path.resolve(__dirname, '..', '..', '..', 'bundle'));
const live = { skip: redisAvailable ? false : 'node-redis is not installed' };

// ---- fake Sentinels and data nodes (on ./fake-resp's server) ----------------------------------------

const auth = (args) => {
  if (args.length === 3 && args[1] === 'emq' && args[2] === 'pw') return OK;
  return new Error('WRONGPASS invalid username-password pair or user is disabled.');
};

/** A Sentinel answering get-master-addr-by-name with `answer()` (an address, null or an Error). */
function sentinel(answer, opts) {
  return fakeServer((args, conn) => {
    const cmd = args[0].toUpperCase();
    if (cmd === 'AUTH') { const r = auth(args); conn.authed = r === OK; return r; }
    if (!conn.authed) return new Error('NOAUTH Authentication required.');
    if (cmd === 'SENTINEL' && args[1].toLowerCase() === 'get-master-addr-by-name' && args[2] === 'emq') {
      const a = answer();
      if (a === null || a instanceof Error) return a;
      const { host, port } = parseHostPort(a);
      return [host, String(port)];
    }
    if (cmd === 'SENTINEL' && args[1].toLowerCase() === 'get-master-addr-by-name') return null;
    return new Error(`NOPERM User emq has no permissions to run the '${args[0]}' command`);
  }, opts);
}

/** A data node: ROLE `role.now`, a fence already in place, a script cache; READONLY when `readonly`. */
async function dataNode(role, opts) {
  const node = await fakeServer((args, conn) => {
    const cmd = args[0].toUpperCase();
    if (cmd === 'AUTH') { const r = auth(args); conn.authed = r === OK; return r; }
    if (!conn.authed) return new Error('NOAUTH Authentication required.');
    if (cmd === 'ROLE') return node.role === 'master' ? ['master', 0, []] : ['slave', '127.0.0.1', 1, 'connected', 0];
    if (cmd === 'SELECT') { conn.db = args[1]; return OK; }
    if (cmd === 'HGETALL' && args[1] === FENCE_KEY) return ['protocol', String(bundle.protocol), 'bundle', bundle.version, 'digest', bundle.digest];
    if (cmd === 'SCRIPT' && args[1].toUpperCase() === 'LOAD') { const sha = sha1(args[2]); node.scripts.add(sha); return sha; }
    if (cmd === 'EVALSHA') {
      if (node.readonly) return new Error("READONLY You can't write against a read only replica.");
      if (!node.scripts.has(args[1])) return new Error('NOSCRIPT No matching script. Please use EVAL.');
      node.ran.push({ db: conn.db, sha: args[1] });
      return node.nextId();
    }
    if (cmd === 'ZCARD') return 0;
    if (cmd === 'INCR') return 1;
    return new Error(`NOPERM User emq has no permissions to run the '${args[0]}' command`);
  }, opts);
  node.role = role;
  node.scripts = new Set();
  node.ran = [];
  node.readonly = false;
  let n = 0;
  node.nextId = () => `j${String(++n).padStart(16, '0')}`;
  return node;
}

/** What a Sentinel may be asked (R11.4): nothing else may reach one. */
const SENTINEL_ALLOWED = new Set(['AUTH', 'HELLO', 'PING', 'CLIENT SETNAME', 'CLIENT SETINFO', 'SENTINEL GET-MASTER-ADDR-BY-NAME', 'SENTINEL GET-PRIMARY-ADDR-BY-NAME', 'SENTINEL SENTINELS']);
function assertOnlySentinelCommands(s) {
  for (const name of s.names()) assert.ok(SENTINEL_ALLOWED.has(name), `a Sentinel was sent ${name}`);
}

/** A port nothing listens on (a Sentinel that refuses every connection). */
async function deadPort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return `127.0.0.1:${port}`;
}

const connectReq = (nodes, db = 3, extra = {}) => ({ cmd: 'connect', session: 's', url: `redis://emq:pw@${nodes[0]}/${db}`, sentinel: { name: 'emq', nodes }, ...extra });
const enqueue = { cmd: 'enqueue', session: 's', queue: 'q', payload: 'p', delay_ms: 0 };
const kindOf = async (p) => p.then(() => 'ok', (e) => e.kind);
const tick = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- validation (R11.1): kind invalid, nothing sent ---------------------------------------------------

test('sentinel is validated before anything is sent', async () => {
  const opened = [];
  const connector = new Connector(bundle, { open: async (...a) => { opened.push(a); return { alive: true, close() {} }; } });
  const base = { cmd: 'connect', session: 's', url: 'redis://emq:pw@127.0.0.1:26379/2' };
  const bad = [
    { name: 'emq', nodes: [] },
    { name: 'emq' },
    { name: '', nodes: ['127.0.0.1:1'] },
    { nodes: ['127.0.0.1:1'] },
    { name: 7, nodes: ['127.0.0.1:1'] },
    { name: 'emq', nodes: '127.0.0.1:1' },
    { name: 'emq', nodes: ['127.0.0.1'] },
    { name: 'emq', nodes: ['127.0.0.1:0'] },
    { name: 'emq', nodes: ['127.0.0.1:65536'] },
    { name: 'emq', nodes: ['127.0.0.1:1', 'localhost:x'] },
    { name: 'emq', nodes: [':26379'] },
    { name: 'emq', nodes: ['::1:26379'] },
    { name: 'emq', nodes: [26379] },
    ['127.0.0.1:1'],
    'emq',
    true,
  ];
  for (const s of bad) assert.equal(await kindOf(connector.handle({ ...base, sentinel: s })), 'invalid', JSON.stringify(s));
  assert.equal(await kindOf(connector.handle({ ...base, url: 'redis://emq:pw@127.0.0.1:26379/0', cluster: true, sentinel: { name: 'emq', nodes: ['127.0.0.1:26379'] } })), 'invalid');
  assert.equal(opened.length, 0);

  await connector.handle({ ...base, sentinel: null });
  assert.equal(opened.at(-1)[3].sentinel, undefined, 'null is no sentinel');
  await connector.handle({ ...base, sentinel: { name: 'emq', nodes: ['127.0.0.1:26379', 'localhost:65535', '[::1]:1'] } });
  assert.deepEqual(opened.at(-1)[3].sentinel, { name: 'emq', nodes: ['127.0.0.1:26379', 'localhost:65535', '[::1]:1'] });
  await connector.handle({ ...base, cluster: false, sentinel: { name: 'emq', nodes: ['127.0.0.1:26379'] } });
  assert.equal(opened.length, 3);
});

test('parseHostPort', () => {
  assert.deepEqual(parseHostPort('localhost:6379'), { host: 'localhost', port: 6379 });
  assert.deepEqual(parseHostPort('[::1]:6379'), { host: '::1', port: 6379 });
  for (const bad of ['', 'h', 'h:', ':1', 'h:0', 'h:65536', 'h:1:2', 'h :1', 'h:+1', 'h:1.0']) assert.equal(parseHostPort(bad), null, bad);
});

// ---- discovery (R11.1, R11.2, R11.4) --------------------------------------------------------------

test('the first Sentinel that names a primary is used: AUTH, no SELECT, one question, closed after', live, async (t) => {
  const primary = await dataNode('master');
  const s1 = await sentinel(() => primary.address);
  const s2 = await sentinel(() => primary.address);
  t.after(() => Promise.all([primary, s1, s2].map((x) => x.close())));
  const connector = new Connector(bundle);
  await connector.handle(connectReq([s1.address, s2.address]));
  assert.deepEqual(s1.names(), ['AUTH', 'SENTINEL GET-MASTER-ADDR-BY-NAME']);
  assert.deepEqual(s1.commands[0], ['AUTH', 'emq', 'pw']);
  assert.deepEqual(s2.commands, [], 'the second Sentinel was not asked');
  assert.deepEqual(primary.names(), ['AUTH', 'ROLE', 'SELECT', 'HGETALL'], 'ROLE before anything but AUTH; SELECT after it');
  await tick(50);
  assert.equal(s1.conns.size, 0, 'the Sentinel connection is closed');
  assert.equal(await connector.handle(enqueue), 'j0000000000000001');
  assert.deepEqual(primary.names().slice(4), ['EVALSHA', 'SCRIPT LOAD', 'EVALSHA']);
  assert.equal(primary.ran[0].db, '3', 'the script ran in the url\'s database');
  await connector.handle({ cmd: 'disconnect', session: 's' });
  await tick(50);
  assert.equal(primary.conns.size, 0, 'disconnect closes the primary connection');
  assertOnlySentinelCommands(s1);
});

test('a refusing, a silent, a nameless and an erring Sentinel are skipped; a stale one leads to ROLE only', live, async (t) => {
  const primary = await dataNode('master');
  const replica = await dataNode('slave');
  const refused = await deadPort();
  const silent = await fakeServer(() => undefined);
  const nameless = await sentinel(() => null);
  const erring = await sentinel(() => new Error('ERR something broke'));
  const stale = await sentinel(() => replica.address);
  const good = await sentinel(() => primary.address);
  t.after(() => Promise.all([primary, replica, silent, nameless, erring, stale, good].map((x) => x.close())));
  const connector = new Connector(bundle);
  const t0 = Date.now();
  await connector.handle(connectReq([refused, silent.address, nameless.address, erring.address, stale.address, good.address]));
  const took = Date.now() - t0;
  assert.ok(took < 2500, `connect took ${took} ms (the silent Sentinel is bounded to ~1 s)`);
  assert.deepEqual(silent.names(), ['AUTH']);
  assert.deepEqual(replica.names(), ['AUTH', 'ROLE'], 'nothing but AUTH and ROLE reaches a replica');
  assert.deepEqual(primary.names(), ['AUTH', 'ROLE', 'SELECT', 'HGETALL']);
  for (const s of [nameless, erring, stale, good]) assertOnlySentinelCommands(s);
  await tick(50);
  for (const s of [silent, nameless, erring, stale, good, replica]) assert.equal(s.conns.size, 0, 'every connection but the primary\'s is closed');
  assert.equal(primary.conns.size, 1);
  await connector.closeAll();
});

test('no primary found: kind engine, saying why; nothing left open', live, async (t) => {
  const replica = await dataNode('slave');
  const nameless = await sentinel(() => null);
  const stale = await sentinel(() => replica.address);
  t.after(() => Promise.all([replica, nameless, stale].map((x) => x.close())));
  const connector = new Connector(bundle);
  const refused = await deadPort();
  await assert.rejects(connector.handle(connectReq([refused])), (e) => e.kind === 'engine' && /no Sentinel answered/.test(e.message));
  await assert.rejects(connector.handle(connectReq([refused, nameless.address])), (e) => e.kind === 'engine' && /no Sentinel knows the name "emq"/.test(e.message));
  await assert.rejects(connector.handle(connectReq([nameless.address, stale.address])), (e) => e.kind === 'engine' && /ROLE master/.test(e.message) && /"slave"/.test(e.message));
  assert.deepEqual(replica.names(), ['AUTH', 'ROLE']);
  assert.equal(await kindOf(connector.handle(enqueue)), 'invalid', 'a session whose connect failed is not registered');
  await tick(50);
  for (const s of [replica, nameless, stale]) assert.equal(s.conns.size, 0);
});

test('named nodes that never answer, or answer ROLE master and then nothing: connect fails (engine) in time', { ...live, timeout: 20000 }, async (t) => {
  const silent = await fakeServer(() => undefined); // accepts, reads every command, answers none
  const mute = await fakeServer((args) => ({ AUTH: OK, ROLE: ['master', 0, []] })[args[0].toUpperCase()]);
  const sentinels = await Promise.all([silent, mute, silent].map((n) => sentinel(() => n.address)));
  t.after(() => Promise.all([silent, mute, ...sentinels].map((x) => x.close())));
  const connector = new Connector(bundle);
  const t0 = Date.now();
  await assert.rejects(connector.handle(connectReq(sentinels.map((s) => s.address))),
    (e) => e.kind === 'engine' && /no Sentinel named a primary/.test(e.message));
  const took = Date.now() - t0;
  assert.ok(took < 8000, `connect took ${took} ms with three Sentinels naming silent nodes`);
  assert.deepEqual(silent.names(), ['AUTH', 'AUTH']);
  assert.deepEqual(mute.names(), ['AUTH', 'ROLE', 'SELECT'], 'its SELECT is bounded too');
  await tick(50);
  for (const n of [silent, mute]) assert.equal(n.conns.size, 0, 'every named node\'s connection is closed');
});

// ---- R11.3: a loss or READONLY, then discovery again ----------------------------------------------

test('READONLY: the call fails (engine), is not re-sent, the connection closes; the next call resolves again', live, async (t) => {
  const old = await dataNode('master');
  const promoted = await dataNode('slave');
  let named = old;
  const s1 = await sentinel(() => named.address);
  t.after(() => Promise.all([old, promoted, s1].map((x) => x.close())));
  const connector = new Connector(bundle);
  await connector.handle(connectReq([s1.address]));
  assert.equal(await connector.handle(enqueue), 'j0000000000000001');
  // The failover: the old primary's connections stay open and answer READONLY.
  old.readonly = true;
  old.role = 'slave';
  promoted.role = 'master';
  named = promoted;
  const before = old.names().length;
  assert.equal(await kindOf(connector.handle(enqueue)), 'engine');
  assert.deepEqual(old.names().slice(before), ['EVALSHA'], 'the failed call was sent once');
  await tick(50);
  assert.equal(old.conns.size, 0, 'the connection that met READONLY is closed');
  assert.equal(await connector.handle(enqueue), 'j0000000000000001');
  assert.deepEqual(promoted.names(), ['AUTH', 'ROLE', 'SELECT', 'HGETALL', 'EVALSHA', 'SCRIPT LOAD', 'EVALSHA'], 'fence first, then the script, loaded there on NOSCRIPT');
  assert.deepEqual(s1.names(), ['AUTH', 'SENTINEL GET-MASTER-ADDR-BY-NAME', 'AUTH', 'SENTINEL GET-MASTER-ADDR-BY-NAME'], 'asked again, nothing remembered');
  assert.equal(old.ran.length, 1);
  await connector.closeAll();
});

test('a lost connection: the next call re-discovers; a failed re-discovery fails that call only', live, async (t) => {
  const primary = await dataNode('master');
  let answer = primary.address;
  const s1 = await sentinel(() => answer);
  t.after(() => Promise.all([primary, s1].map((x) => x.close())));
  const connector = new Connector(bundle);
  await connector.handle(connectReq([s1.address]));
  for (const sock of primary.conns) sock.destroy(); // the engine closes the connection (CLIENT KILL)
  await tick(50);
  answer = null; // the Sentinels know no primary for a moment
  assert.equal(await kindOf(connector.handle(enqueue)), 'engine');
  answer = primary.address;
  assert.equal(await connector.handle(enqueue), 'j0000000000000001');
  assert.equal(primary.ran.length, 1, 'one script ran: nothing was re-sent');
  assert.equal(s1.names().filter((n) => n.startsWith('SENTINEL')).length, 3);
  const fenceReads = primary.names().filter((n) => n === 'HGETALL').length;
  assert.equal(fenceReads, 2, 'the fence is read on the new connection');
  await connector.closeAll();
});

test('a pipeline that meets READONLY marks the primary stale too', live, async (t) => {
  const primary = await dataNode('master');
  const s1 = await sentinel(() => primary.address);
  t.after(() => Promise.all([primary, s1].map((x) => x.close())));
  const connector = new Connector(bundle);
  await connector.handle(connectReq([s1.address]));
  assert.equal(await connector.handle({ cmd: 'batch', session: 's', queue: 'q', n: 4, depth: 2, payload: 'p' }), 4);
  primary.readonly = true;
  assert.equal(await kindOf(connector.handle({ cmd: 'batch', session: 's', queue: 'q', n: 4, depth: 2, payload: 'p' })), 'engine');
  await tick(50);
  assert.equal(primary.conns.size, 0);
  primary.readonly = false;
  assert.equal(await connector.handle({ cmd: 'pending_size', session: 's', queue: 'q' }), 0);
  assert.equal(primary.names().filter((n) => n === 'ROLE').length, 2);
  await connector.closeAll();
});

// ---- rediss:// (R10.x): every Sentinel connection TLS too, ca_file only, the name checked -----------

const hasOpenssl = (() => {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

function pki() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'emq-node-sentinel-'));
  const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-subj', '/CN=ca', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
    '-keyout', 'ca.key', '-out', 'ca.pem');
  const server = (name, san) => {
    openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', `/CN=${name}`, '-keyout', `${name}.key`, '-out', `${name}.csr`);
    fs.writeFileSync(path.join(dir, `${name}.ext`), `subjectAltName=${san}\nextendedKeyUsage=serverAuth\n`);
    openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', `${name}.ext`, '-out', `${name}.pem`);
    return { key: fs.readFileSync(path.join(dir, `${name}.key`)), cert: fs.readFileSync(path.join(dir, `${name}.pem`)) };
  };
  return { dir, caFile: path.join(dir, 'ca.pem'), localhost: server('localhost', 'DNS:localhost'), other: server('other', 'DNS:other.example') };
}

test('rediss://: Sentinels and the primary over TLS, each checked against its own host name', { skip: !redisAvailable ? 'node-redis is not installed' : !hasOpenssl && 'no openssl' }, async (t) => {
  const certs = pki();
  const primary = await dataNode('master', { tlsCert: certs.localhost });
  const wrongName = await sentinel(() => primary.address, { tlsCert: certs.other });
  const byAddress = await sentinel(() => `127.0.0.1:${primary.port}`, { tlsCert: certs.localhost }); // no certificate names 127.0.0.1
  const good = await sentinel(() => primary.address, { tlsCert: certs.localhost });
  const plain = await sentinel(() => primary.address);
  t.after(async () => {
    await Promise.all([primary, wrongName, byAddress, good, plain].map((x) => x.close()));
    fs.rmSync(certs.dir, { recursive: true, force: true });
  });
  const nodes = [`localhost:${plain.port}`, wrongName.address, byAddress.address, good.address];
  const connector = new Connector(bundle);
  await connector.handle({ cmd: 'connect', session: 's', url: `rediss://emq:pw@${nodes[0]}/2`, ca_file: certs.caFile, sentinel: { name: 'emq', nodes } });
  assert.deepEqual(plain.commands, [], 'no plaintext command reaches a Sentinel');
  assert.deepEqual(wrongName.commands, [], 'a Sentinel whose certificate names another host is sent nothing');
  assert.ok(wrongName.handshakeErrors + byAddress.handshakeErrors >= 1);
  assert.deepEqual(byAddress.names(), ['AUTH', 'SENTINEL GET-MASTER-ADDR-BY-NAME']);
  assert.deepEqual(good.names(), ['AUTH', 'SENTINEL GET-MASTER-ADDR-BY-NAME']);
  assert.deepEqual(primary.names(), ['AUTH', 'ROLE', 'SELECT', 'HGETALL'], 'the primary reached by 127.0.0.1 was refused before any command');
  assert.equal(await connector.handle(enqueue), 'j0000000000000001');
  await connector.closeAll();
});
