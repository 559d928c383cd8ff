'use strict';
// Wire framing (SPEC §5): one response line per request, in order, echoing seq; stop answers nothing.
const test = require('node:test');
const assert = require('node:assert/strict');
const { PassThrough } = require('node:stream');
const { parseRequest, serveLine, runLoop, okLine, MAX_LINE } = require('../src/protocol');
const { ConnectorError } = require('../src/errors');

test('parseRequest keeps seq and rejects non-objects', () => {
  assert.deepEqual(parseRequest('{"seq":7,"cmd":"x"}'), { seq: 7, req: { seq: 7, cmd: 'x' } });
  assert.equal(parseRequest('nope').error.kind, 'invalid');
  assert.equal(parseRequest('[1]').error.kind, 'invalid');
  const noCmd = parseRequest('{"seq":3}');
  assert.equal(noCmd.seq, 3);
  assert.equal(noCmd.error.kind, 'invalid');
});

test('serveLine shapes ok, error and internal lines', async () => {
  const ok = await serveLine('{"seq":1,"cmd":"a"}', async () => ({ x: 1 }));
  assert.equal(ok, '{"seq":1,"ok":{"x":1}}\n');
  const nul = await serveLine('{"seq":2,"cmd":"a"}', async () => null);
  assert.equal(nul, '{"seq":2,"ok":null}\n');
  const err = await serveLine('{"seq":3,"cmd":"a"}', async () => {
    throw new ConnectorError('invalid', 'lease_ms must be >= 0');
  });
  assert.equal(err, '{"seq":3,"error":{"kind":"invalid","message":"lease_ms must be >= 0"}}\n');
  const internal = await serveLine('{"seq":4,"cmd":"a"}', async () => {
    throw new TypeError('boom');
  });
  assert.deepEqual(JSON.parse(internal), { seq: 4, error: { kind: 'internal', message: 'boom' } });
  assert.equal(await serveLine('{"seq":5,"cmd":"stop"}', async () => 1), null);
});

async function exchange(lines, handle) {
  const input = new PassThrough();
  const output = new PassThrough();
  let text = '';
  output.on('data', (d) => (text += d));
  const done = runLoop(input, output, handle);
  for (const l of lines) input.write(l + '\n');
  input.end();
  await done;
  return text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

test('responses come one per request, in order, even when handlers finish out of order', async () => {
  const delays = [30, 0, 10, 0, 20];
  const lines = delays.map((d, i) => JSON.stringify({ seq: i + 1, cmd: 'sleep', d }));
  const out = await exchange(lines, (req) => new Promise((r) => setTimeout(() => r(req.d), req.d)));
  assert.deepEqual(out.map((o) => o.seq), [1, 2, 3, 4, 5]);
  assert.deepEqual(out.map((o) => o.ok), delays);
});

test('stop ends the loop without a response; later lines are ignored', async () => {
  let served = 0;
  const out = await exchange(
    ['{"seq":1,"cmd":"a"}', '', '{"seq":2,"cmd":"stop"}', '{"seq":3,"cmd":"a"}'],
    async () => ++served,
  );
  assert.deepEqual(out, [{ seq: 1, ok: 1 }]);
  assert.equal(served, 1);
});

test('a one-MiB payload line round-trips', async () => {
  const payload = 'x'.repeat(1 << 20);
  const out = await exchange([JSON.stringify({ seq: 9, cmd: 'echo', payload })], async (r) => r.payload);
  assert.equal(out[0].ok.length, 1 << 20);
});

test('the launcher serves hello and exits 0 on stop', () => {
  const { spawnSync } = require('node:child_process');
  const path = require('node:path');
  const bin = path.resolve(__dirname, '..', 'bin', 'emq-connector-node');
  const r = spawnSync(bin, [], {
    input: '{"seq":1,"cmd":"hello","protocol":1}\n{"seq":2,"cmd":"hello","protocol":2}\n{"seq":3,"cmd":"stop"}\n',
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  const [a, b, ...rest] = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(rest.length, 0);
  assert.equal(a.seq, 1);
  assert.equal(a.ok.bundle, '1.0.0');
  assert.equal(a.ok.language, 'node');
  assert.equal(a.ok.scripts.claim, '2319de1e94e21dd355032c7a25b90636b53f36cd');
  assert.deepEqual(b, { seq: 2, error: { kind: 'unsupported', message: b.error.message } });
});

test('a reply over 16 MiB is kind internal naming its size (R5.11, R5.6)', () => {
  const fits = 'x'.repeat(MAX_LINE - JSON.stringify({ seq: 1, ok: '' }).length);
  assert.equal(okLine(1, fits, 'browse').length - 1, MAX_LINE);
  const over = JSON.parse(okLine(1, fits + 'x', 'browse'));
  assert.equal(over.error.kind, 'internal');
  assert.match(over.error.message, /browse reply would be a 16777217-byte line/);
});
