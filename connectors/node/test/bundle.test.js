'use strict';
// Bundle loading (SPEC §2): sha1 per script, digest over the six SHAs, exit 2 on mismatch.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { loadBundle, resolveBundleDir, BundleError, SCRIPT_ORDER } = require('../src/bundle');

const REPO_BUNDLE = path.resolve(__dirname, '..', '..', '..', 'bundle');
const BIN = path.resolve(__dirname, '..', 'bin', 'emq-connector-node');

function copyBundle() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'emq-bundle-'));
  fs.cpSync(REPO_BUNDLE, dir, { recursive: true });
  return dir;
}

test('the repository bundle verifies', () => {
  const b = loadBundle(REPO_BUNDLE);
  assert.equal(b.version, '1.0.0');
  assert.equal(b.digest, '1de960bd4544272d03488e8d9fe0b744147b1802');
  assert.deepEqual(Object.keys(b.scripts), SCRIPT_ORDER);
  assert.ok(Buffer.isBuffer(b.scripts.enqueue.source));
});

test('bundle dir: --bundle, then $EMQ_BUNDLE_DIR, then the repository', () => {
  assert.equal(resolveBundleDir('/x', { EMQ_BUNDLE_DIR: '/y' }), '/x');
  assert.equal(resolveBundleDir(null, { EMQ_BUNDLE_DIR: '/y' }), '/y');
  assert.equal(resolveBundleDir(null, {}), REPO_BUNDLE);
});

test('a changed script byte is refused', () => {
  const dir = copyBundle();
  fs.appendFileSync(path.join(dir, 'scripts', 'retry.lua'), '\n');
  assert.throws(() => loadBundle(dir), (e) => e instanceof BundleError && /retry/.test(e.message));
});

test('a wrong digest is refused', () => {
  const dir = copyBundle();
  const m = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
  m.digest = '0'.repeat(40);
  fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(m));
  assert.throws(() => loadBundle(dir), (e) => e instanceof BundleError && /digest/.test(e.message));
});

test('the launcher exits 2 with one stderr line on a bad bundle', () => {
  const dir = copyBundle();
  fs.appendFileSync(path.join(dir, 'scripts', 'enqueue.lua'), '-- x\n');
  for (const [args, env] of [[['--bundle', dir], {}], [[], { EMQ_BUNDLE_DIR: dir }]]) {
    const r = spawnSync(BIN, args, { input: '', encoding: 'utf8', env: { ...process.env, ...env } });
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.match(r.stderr, /enqueue/);
  }
});
