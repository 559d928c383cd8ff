'use strict';
// Redirects and NOSCRIPT on a cluster (SPEC R8.2, R8.6, R8.8, R4.17), no engine needed: a
// ClusterEngineSession over fake node clients that answer like Valkey nodes during a slot
// migration (the source answers ASK, the target wants ASKING first and has an empty script cache).
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { loadBundle, sha1 } = require('../src/bundle');
const { ClusterEngineSession, redirectOf, slotOf, queueKey } = require('../src/engine');

const bundle = loadBundle(path.resolve(__dirname, '..', '..', '..', 'bundle'));
const Q = 'mq';
const SLOT = slotOf(queueKey(Q, 'pending'));

class ErrorReply extends Error {}

/** A node: `serve(args)` answers a data command; the node models ASKING and its script cache. */
class FakeNode {
  constructor(port, serve) {
    this.options = { socket: { host: '127.0.0.1', port } };
    this.address = `127.0.0.1:${port}`;
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
