'use strict';
// Cluster routing helpers of the engine seam (SPEC §8), no engine needed.
const test = require('node:test');
const assert = require('node:assert/strict');
const { slotOf, queueKey, jobRoot, FENCE_KEY } = require('../src/engine');

test('slotOf is Valkey Cluster key hashing (CRC16/XMODEM mod 16384, hash tags)', () => {
  // Expected values: CLUSTER KEYSLOT on Valkey 9.1.2.
  assert.equal(slotOf('123456789'), 12739); // 0x31c3, the CRC16/XMODEM check value
  assert.equal(slotOf('foo'), 12182);
  assert.equal(slotOf('{user1000}.following'), slotOf('user1000'));
  assert.equal(slotOf('foo{}{bar}'), 8363); // an empty tag hashes the whole key
  assert.equal(slotOf('foo{{bar}}zap'), 4015); // the tag is `{bar`
  assert.equal(slotOf('{bar'), 4015);
  assert.equal(slotOf(FENCE_KEY), 4709);
});

test('every key of a queue, and its job root, share one slot (R1.2)', () => {
  for (const q of ['q0', 'orders', 'A.b_c-9', 'x'.repeat(128)]) {
    const slot = slotOf(queueKey(q, 'pending'));
    for (const k of ['active', 'delayed', 'dead', 'seq']) assert.equal(slotOf(queueKey(q, k)), slot);
    assert.equal(slotOf(`${jobRoot(q)}j0000000000000001`), slot);
  }
});
