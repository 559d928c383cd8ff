'use strict';
// The seam rule (SPEC §4 "Sole raw-Redis seam"): src/engine.js is the only source file that loads
// node-redis or spells an EchoMQ key. Every other source file of the connector is scanned here.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const SEAM = path.join(ROOT, 'src', 'engine.js');

// Module specifiers of require('...'), import('...') and import ... from '...'.
const SPECIFIER = /(?:require\s*\(|import\s*\(|\bfrom)\s*['"`]([^'"`]+)['"`]/g;
// 'redis', '@redis/client', '/usr/share/nodejs/redis', 'redis/dist/...'
const REDIS_MODULE = /(?:^|\/|@)redis(?:\/|$)/;
const EMQ_KEY = /emq:/;

const loadsRedis = (source) => [...source.matchAll(SPECIFIER)].some((m) => REDIS_MODULE.test(m[1]));

function violations(source) {
  const found = [];
  if (loadsRedis(source)) found.push('loads node-redis');
  if (EMQ_KEY.test(source)) found.push('spells an emq: key');
  return found;
}

function sourceFiles() {
  const out = [];
  const walk = (dir) => {
    for (const ent of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, ent.name);
      if (ent.isDirectory()) walk(p);
      else if (ent.name.endsWith('.js') || ent.name.endsWith('.mjs') || ent.name.endsWith('.cjs') || dir.endsWith(path.sep + 'bin')) out.push(p);
    }
  };
  walk(path.join(ROOT, 'src'));
  walk(path.join(ROOT, 'bin'));
  return out;
}

test('the scanner flags what it must and passes what it may', () => {
  assert.deepEqual(violations("const r = require('redis');"), ['loads node-redis']);
  assert.deepEqual(violations('const r = require("@redis/client");'), ['loads node-redis']);
  assert.deepEqual(violations("require('/usr/share/nodejs/redis')"), ['loads node-redis']);
  assert.deepEqual(violations("import { createClient } from 'redis';"), ['loads node-redis']);
  assert.deepEqual(violations('const k = `emq:{${q}}:pending`;'), ['spells an emq: key']);
  assert.deepEqual(violations("const k = 'emq:' + 'fence';"), ['spells an emq: key']);
  assert.deepEqual(violations("const e = require('./engine'); // redis lives there"), []);
});

test('the seam module exists and owns both the client and the key schema', () => {
  const seam = fs.readFileSync(SEAM, 'utf8');
  assert.ok(loadsRedis(seam), 'engine.js should load node-redis');
  assert.ok(EMQ_KEY.test(seam), 'engine.js should own the emq: key schema');
});

test('no other source file loads node-redis or builds an emq: key', () => {
  const files = sourceFiles().filter((f) => f !== SEAM);
  assert.ok(files.length >= 5, `expected the connector's sources, found ${files.length}`);
  const bad = [];
  for (const f of files) {
    for (const v of violations(fs.readFileSync(f, 'utf8'))) bad.push(`${path.relative(ROOT, f)} ${v}`);
  }
  assert.deepEqual(bad, [], 'only src/engine.js may touch node-redis or the emq: key schema');
});

module.exports = { violations };
