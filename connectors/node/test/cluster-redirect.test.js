'use strict';
// Redirects and NOSCRIPT on a cluster (SPEC R8.2, R8.6, R8.8, R4.17), no engine needed: a
// ClusterEngineSession over fake node clients that answer like Valkey nodes during a slot
// migration (the source answers ASK, the target wants ASKING first and has an empty script cache).
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { loadBundle, sha1 } = require('../src/bundle');
const { ClusterEngineSession, redirectOf, endpointOf, slotOf, queueKey } = require('../src/engine');

const bundle = loadBundle(path.resolve(__dirname, '..', '..', '..', 'bundle'));
const Q = 'mq';
const SLOT = slotOf(queueKey(Q, 'pending'));

class ErrorReply extends Error {}

/** A node: `serve(args)` answers a data command; the node models ASKING and its script cache. */
class FakeNode {
  constructor(port, serve, host = '127.0.0.1') {
    this.options = { socket: { host, port } };
    this.address = `${host}:${port}`;
    this.serve = serve;
    this.scripts = new Set();
    this.asking = false;
    this.log = [];
  }

  sendCommand(args) {
    const cmd = args.map(String);
    this.log.push(cmd[0] === 'SCRIPT' ? 'SCRIPT LOAD' : cmd.slice(0, 2).join(' '));
    const asking = this.asking;
    this.asking = false;
    if (cmd[0] === 'ASKING') {
      this.asking = true;
      return Promise.resolve('OK');
    }
    if (cmd[0] === 'SCRIPT') {
      const sha = sha1(args[2]);
      this.scripts.add(sha);
      return Promise.resolve(sha);
    }
    try {
      return Promise.resolve(this.serve(cmd, asking, this));
    } catch (err) {
      return Promise.reject(err);
    }
  }
}

const runScript = (cmd, node) => {
  if (cmd[0] === 'EVALSHA' && !node.scripts.has(cmd[1])) throw new ErrorReply('NOSCRIPT No matching script.');
  return cmd[0] === 'EVALSHA' ? 'ran' : 'read';
};

function session(nodes, owner, library = () => assert.fail('node-redis #execute was not expected')) {
  const s = new ClusterEngineSession(bundle, () => {});
  const map = { owner };
  s.cluster = {
    getSlotMaster: () => ({ client: map.owner }),
    getMasters: () => nodes.map((client) => ({ client })),
    sendCommand: (key, ro, args) => library(args, map),
  };
  return s;
}

/** A migration in progress: the slot is the source's, the queue's keys are on the target. */
function migrating() {
  const target = new FakeNode(7002, (cmd, asking, node) => {
    if (!asking) throw new ErrorReply(`MOVED ${SLOT} ${source.address}`);
    return runScript(cmd, node);
  });
  const source = new FakeNode(7001, () => {
    throw new ErrorReply(`ASK ${SLOT} ${target.address}`);
  });
  for (const sha of Object.values(bundle.scripts).map((x) => x.sha)) source.scripts.add(sha);
  return { source, target };
}

test('redirectOf parses MOVED and ASK, nothing else', () => {
  assert.deepEqual(redirectOf(new Error('ASK 3999 127.0.0.1:6381')), { ask: true, slot: 3999, address: '127.0.0.1:6381' });
  assert.deepEqual(redirectOf(new Error('MOVED 12 node-3:7000')), { ask: false, slot: 12, address: 'node-3:7000' });
  assert.equal(redirectOf(new Error('NOSCRIPT No matching script.')), null);
  assert.equal(redirectOf(new Error('TRYAGAIN Multiple keys request during rehashing of slot')), null);
  assert.equal(redirectOf(new Error('Socket closed unexpectedly')), null);
});

test('R8.13: a redirect with no host names a node on the host of the node that sent it', () => {
  assert.deepEqual(redirectOf(new Error('ASK 12 :7001'), '10.0.0.5'), { ask: true, slot: 12, address: '10.0.0.5:7001' });
  assert.deepEqual(redirectOf(new Error('MOVED 12 :7001'), 'node-3'), { ask: false, slot: 12, address: 'node-3:7001' });
  assert.deepEqual(redirectOf(new Error('MOVED 12 :7001')), { ask: false, slot: 12, address: ':7001' }, 'no sender known: kept');
  // A named host is kept, whoever sent it: an IPv6 address has a host before its last colon, and
  // `?` (a hostname endpoint with no hostname: a misconfigured cluster, R8.13) is not guessed at.
  assert.equal(endpointOf('127.0.0.1:7001', '10.0.0.5'), '127.0.0.1:7001');
  assert.equal(endpointOf('::1:7001', '10.0.0.5'), '::1:7001');
  assert.equal(endpointOf('?:7001', '10.0.0.5'), '?:7001');
});

test('R8.13: ASK <slot> :<port> goes to <port> on the answering node\'s host, ASKING first, and the call succeeds', async () => {
  // Two nodes listen on port 7002, on two hosts: the one on the source's host is the one meant.
  const target = new FakeNode(7002, (cmd, asking, node) => {
    if (!asking) throw new ErrorReply(`MOVED ${SLOT} :7001`);
    return runScript(cmd, node);
  }, 'node-a');
  const elsewhere = new FakeNode(7002, () => assert.fail('a node on another host'), 'node-b');
  const source = new FakeNode(7001, () => {
    throw new ErrorReply(`ASK ${SLOT} :7002`);
  }, 'node-a');
  const s = session([elsewhere, source, target], source);
  const sha = bundle.scripts.enqueue.sha;
  assert.equal(await s.evalScript('enqueue', Q, ['p', 0, 0]), 'ran');
  assert.deepEqual(target.log, ['ASKING', `EVALSHA ${sha}`, 'SCRIPT LOAD', 'ASKING', `EVALSHA ${sha}`]);
  assert.deepEqual(source.log, [`EVALSHA ${sha}`]);
  assert.deepEqual(elsewhere.log, []);
});

test('R8.13: node-redis that cannot map an empty-host ASK leaves it to the connector, on the slot owner\'s host', async () => {
  // The session has no client for the target until node-redis's rediscovery (inside its
  // #execute) makes one; node-redis then throws `Cannot find node :7002`, before it sent anything
  // there. The answering node is the slot's primary in the map it read.
  const target = new FakeNode(7002, (cmd, asking, node) => {
    if (!asking) throw new ErrorReply(`MOVED ${SLOT} :7001`);
    return runScript(cmd, node);
  }, 'node-a');
  for (const sha of Object.values(bundle.scripts).map((x) => x.sha)) target.scripts.add(sha);
  const source = new FakeNode(7001, () => {
    throw new ErrorReply(`ASK ${SLOT} :7002`);
  }, 'node-a');
  const nodes = [new FakeNode(7002, () => assert.fail('a node on another host'), 'node-b'), source];
  let library = 0;
  const s = session(nodes, source, (args) => {
    library++;
    source.sendCommand(args).catch(() => {});
    nodes.push(target); // rediscovered
    return Promise.reject(new Error('Cannot find node :7002'));
  });
  assert.equal(await s.evalScript('claim', Q, [1, 60000]), 'ran');
  assert.equal(library, 1);
  assert.deepEqual(target.log, ['ASKING', `EVALSHA ${bundle.scripts.claim.sha}`]);
  assert.deepEqual(nodes[0].log, []);
});

test('ASK to a target without the script: SCRIPT LOAD on the target, then ASKING and EVALSHA there (R8.8)', async () => {
  const { source, target } = migrating();
  const s = session([source, target], source);
  const sha = bundle.scripts.enqueue.sha;
  assert.equal(await s.evalScript('enqueue', Q, ['p', 0, 0]), 'ran');
  assert.deepEqual(source.log, [`EVALSHA ${sha}`]);
  assert.deepEqual(target.log, ['ASKING', `EVALSHA ${sha}`, 'SCRIPT LOAD', 'ASKING', `EVALSHA ${sha}`]);
  // The slot map was left as it was: the next call goes to the source again, and the target
  // (now loaded) runs it after one ASK.
  target.log = [];
  source.log = [];
  assert.equal(await s.evalScript('enqueue', Q, ['p', 0, 0]), 'ran');
  assert.deepEqual(source.log, [`EVALSHA ${sha}`]);
  assert.deepEqual(target.log, ['ASKING', `EVALSHA ${sha}`]);
});

test('pipelined calls that meet ASK: one load on the target, every call again after its own ASKING', async () => {
  const { source, target } = migrating();
  const s = session([source, target], source);
  const sha = bundle.scripts.claim.sha;
  assert.deepEqual(await s.evalPipelined('claim', Q, [1, 60000], 3), ['ran', 'ran', 'ran']);
  assert.equal(target.log.filter((c) => c === 'SCRIPT LOAD').length, 1);
  assert.deepEqual(target.log.slice(-7), ['SCRIPT LOAD', 'ASKING', `EVALSHA ${sha}`, 'ASKING', `EVALSHA ${sha}`, 'ASKING', `EVALSHA ${sha}`]);
  assert.equal(source.log.filter((c) => c === 'SCRIPT LOAD').length, 0);
  // A read follows ASK too (browse's ZRANGE and payload reads).
  assert.equal(await s.pendingSize(Q), 'read');
});

test('MOVED to a node without the script: SCRIPT LOAD on the new owner, not the stale one', async () => {
  const owner = new FakeNode(7002, (cmd, asking, node) => runScript(cmd, node));
  const stale = new FakeNode(7001, () => {
    throw new ErrorReply(`MOVED ${SLOT} ${owner.address}`);
  });
  let refreshed = 0;
  // node-redis's #execute on MOVED: rediscover (the map now names the owner), re-send there.
  const library = (args, map) => {
    map.owner.sendCommand(args).catch(() => {});
    refreshed++;
    map.owner = owner;
    return owner.sendCommand(args);
  };
  const s = session([stale, owner], stale, library);
  const sha = bundle.scripts.promote.sha;
  assert.equal(await s.evalScript('promote', Q, [10]), 'ran');
  assert.equal(refreshed, 1);
  assert.deepEqual(owner.log, [`EVALSHA ${sha}`, 'SCRIPT LOAD', `EVALSHA ${sha}`]);
  assert.ok(!stale.log.includes('SCRIPT LOAD'));
});

test('a connection error after ASK is never followed by the call again (R4.17)', async () => {
  const { source } = migrating();
  const target = new FakeNode(7002, () => {
    throw new Error('Socket closed unexpectedly');
  });
  source.serve = () => {
    throw new ErrorReply(`ASK ${SLOT} ${target.address}`);
  };
  const s = session([source, target], source);
  await assert.rejects(s.evalScript('reap', Q, [5, 10]), (e) => e.kind === 'engine' && /Socket closed/.test(e.message));
  assert.deepEqual(target.log, ['ASKING', `EVALSHA ${bundle.scripts.reap.sha}`]);
  assert.equal(source.log.length, 1);
});

test('TRYAGAIN from the target is kind engine, sent once', async () => {
  const { source } = migrating();
  const target = new FakeNode(7002, () => {
    throw new ErrorReply('TRYAGAIN Multiple keys request during rehashing of slot');
  });
  source.serve = () => {
    throw new ErrorReply(`ASK ${SLOT} ${target.address}`);
  };
  const s = session([source, target], source);
  await assert.rejects(s.evalScript('claim', Q, [1, 60000]), (e) => e.kind === 'engine' && /TRYAGAIN/.test(e.message));
  assert.deepEqual(target.log, ['ASKING', `EVALSHA ${bundle.scripts.claim.sha}`]);
});

test('a node that says NOSCRIPT again after its load is an error, not a loop', async () => {
  const owner = new FakeNode(7001, () => {
    throw new ErrorReply('NOSCRIPT No matching script.');
  });
  const s = session([owner], owner);
  await assert.rejects(s.evalScript('complete', Q, ['j1', 1]), (e) => e.kind === 'engine' && /NOSCRIPT/.test(e.message));
  assert.equal(owner.log.filter((c) => c === 'SCRIPT LOAD').length, 1);
  assert.equal(owner.log.length, 3);
});
