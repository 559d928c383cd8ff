'use strict';
// TLS (SPEC §10): connect's ca_file and rediss:// in validation (R10.1, kind `invalid`, nothing
// dialled), the socket options the seam gives node-redis, and, against a local TLS server made
// here with openssl (skipped without it), that the chain and the name are verified (R10.3, R10.4:
// kind `engine`, nothing sent) and that an accepted session speaks TLS from its first byte (R10.2).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const net = require('node:net');
const tls = require('node:tls');
const { execFileSync } = require('node:child_process');
const { validateVerb } = require('../src/validate');
const { Connector } = require('../src/connector');
const { loadBundle } = require('../src/bundle');
const { EngineSession, tlsSocketOptions, readCaFile } = require('../src/engine');

const bundle = loadBundle(path.resolve(__dirname, '..', '..', '..', 'bundle'));
const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'emq-node-tls-'));
test.after(() => fs.rmSync(TMP, { recursive: true, force: true }));

const hasOpenssl = (() => {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

const openssl = (...args) => execFileSync('openssl', args, { cwd: TMP, stdio: ['ignore', 'ignore', 'pipe'] });

/** A CA (key + self-signed cert) named `name` in TMP. */
function makeCa(name) {
  openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-subj', `/CN=${name}`, '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
    '-keyout', `${name}.key`, '-out', `${name}.pem`);
  return { key: path.join(TMP, `${name}.key`), cert: path.join(TMP, `${name}.pem`) };
}

/** A server certificate signed by `ca` whose subjectAltName is `san` (e.g. DNS:localhost). */
function makeServer(name, ca, san) {
  openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', `/CN=${name}`,
    '-keyout', `${name}.key`, '-out', `${name}.csr`);
  fs.writeFileSync(path.join(TMP, `${name}.ext`), `subjectAltName=${san}\nextendedKeyUsage=serverAuth\n`);
  openssl('x509', '-req', '-in', `${name}.csr`, '-CA', ca.cert, '-CAkey', ca.key, '-CAcreateserial', '-days', '2',
    '-extfile', `${name}.ext`, '-out', `${name}.pem`);
  return { key: fs.readFileSync(path.join(TMP, `${name}.key`)), cert: fs.readFileSync(path.join(TMP, `${name}.pem`)) };
}

let pki; // made once, lazily (openssl takes a moment)
function certs() {
  if (!pki) {
    const ca = makeCa('ca');
    const other = makeCa('other-ca');
    pki = {
      caFile: ca.cert,
      otherCaFile: other.cert,
      good: makeServer('good', ca, 'DNS:localhost'),
      wrongName: makeServer('wrong-name', ca, 'DNS:elsewhere.example'),
      otherCa: makeServer('other', other, 'DNS:localhost'),
    };
  }
  return pki;
}

const connect = (patch) => validateVerb('connect', { session: 's', url: 'rediss://:pw@localhost:6380/0', ...patch });
const invalidKind = (fn, pattern) => assert.throws(fn, (err) => {
  assert.equal(err.kind, 'invalid');
  if (pattern) assert.match(err.message, pattern);
  return true;
});

// ---- validation (R10.1) -------------------------------------------------------------------------

test('rediss:// is a url like redis://; ca_file is optional with it', () => {
  assert.deepEqual(connect({}).args, { url: 'rediss://:pw@localhost:6380/0', cluster: false });
  assert.equal(connect({ url: 'rediss://localhost:6380' }).args.url, 'rediss://localhost:6380');
  invalidKind(() => connect({ url: 'rediss://localhost:6380/zero' }), /database/);
  invalidKind(() => connect({ url: 'valkeys://localhost:6380/0' }), /scheme/);
  invalidKind(() => connect({ url: 'unix:///tmp/v.sock' }), /scheme/);
});

test('a rediss url with a readable ca_file is accepted, its certificates read once', { skip: !hasOpenssl && 'no openssl' }, () => {
  const { caFile, otherCaFile } = certs();
  const { args } = connect({ ca_file: caFile });
  assert.equal(args.ca.length, 1);
  assert.match(args.ca[0], /^-----BEGIN CERTIFICATE-----/);
  // a bundle of several CAs: every one is trusted
  const both = path.join(TMP, 'both.pem');
  fs.writeFileSync(both, fs.readFileSync(caFile, 'utf8') + fs.readFileSync(otherCaFile, 'utf8'));
  assert.equal(connect({ ca_file: both }).args.ca.length, 2);
  assert.equal(connect({ ca_file: caFile, cluster: true, url: 'rediss://localhost:7000' }).args.ca.length, 1);
});

test('ca_file with a redis:// url is invalid (case connect-ca-file-needs-rediss)', () => {
  invalidKind(() => connect({ url: 'redis://127.0.0.1:6379/0', ca_file: '/etc/ssl/certs/ca-certificates.crt' }), /rediss/);
  invalidKind(() => connect({ url: 'redis://127.0.0.1:6379/0', ca_file: '/no/such/file.pem' }), /rediss/);
});

test('ca_file must be a readable PEM file holding a certificate', () => {
  invalidKind(() => connect({ ca_file: path.join(TMP, 'missing.pem') }), /cannot be read.*ENOENT/);
  invalidKind(() => connect({ ca_file: TMP }), /cannot be read/); // a directory
  const empty = path.join(TMP, 'empty.pem');
  fs.writeFileSync(empty, '');
  invalidKind(() => connect({ ca_file: empty }), /no PEM certificate/);
  const keyOnly = path.join(TMP, 'key-only.pem');
  fs.writeFileSync(keyOnly, '-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n');
  invalidKind(() => connect({ ca_file: keyOnly }), /no PEM certificate/);
  const garbage = path.join(TMP, 'garbage.pem');
  fs.writeFileSync(garbage, '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n');
  invalidKind(() => connect({ ca_file: garbage }), /does not parse/);
  for (const ca_file of ['', 5, true, ['a']]) invalidKind(() => connect({ ca_file }), /ca_file/);
  assert.throws(() => readCaFile(path.join(TMP, 'missing.pem')), /cannot be read/);
});

test('an unreadable ca_file is invalid and nothing is dialled', async () => {
  const opened = [];
  const connector = new Connector(bundle, { open: async (...a) => { opened.push(a); return { alive: true, close() {} }; } });
  for (const ca_file of [path.join(TMP, 'missing.pem'), TMP]) {
    await assert.rejects(connector.handle({ cmd: 'connect', session: 'w', url: 'rediss://:pw@localhost:1/0', ca_file }), { kind: 'invalid' });
  }
  await assert.rejects(connector.handle({ cmd: 'connect', session: 'w', url: 'redis://:pw@localhost:1/0', ca_file: '/etc/hosts' }), { kind: 'invalid' });
  assert.deepEqual(opened, []);
  // a good one reaches open() with the url and the certificates (and so do its reconnects)
  if (hasOpenssl) {
    await connector.handle({ cmd: 'connect', session: 'w', url: 'rediss://:pw@localhost:1/0', ca_file: certs().caFile });
    assert.equal(opened.length, 1);
    assert.equal(opened[0][0], 'rediss://:pw@localhost:1/0');
    assert.equal(opened[0][3].ca.length, 1);
  }
});

// ---- the socket options of the seam -------------------------------------------------------------

test('tlsSocketOptions: nothing for redis://; verified TLS for rediss://', () => {
  assert.deepEqual(tlsSocketOptions('redis://:pw@localhost:6379/0', undefined), {});
  const o = tlsSocketOptions('rediss://:pw@localhost:6380/0', ['PEM']);
  assert.equal(o.tls, true);
  assert.equal(o.rejectUnauthorized, true);
  assert.equal(o.checkServerIdentity, tls.checkServerIdentity);
  assert.deepEqual(o.ca, ['PEM']);
  assert.equal(o.servername, 'localhost');
  // without ca_file: Node's default trust store (no `ca` option at all)
  assert.equal('ca' in tlsSocketOptions('rediss://h.example:6380', undefined), false);
  // an address is no SNI name: the name checked is then the host itself (node's _tls_wrap)
  assert.equal('servername' in tlsSocketOptions('rediss://127.0.0.1:6380', undefined), false);
  // a cluster's node defaults: no fixed servername, each node's own host is checked
  const d = tlsSocketOptions('rediss://localhost:7000', ['PEM'], { sni: false });
  assert.equal(d.tls, true);
  assert.equal('servername' in d, false);
});

// ---- against a local TLS server ----------------------------------------------------------------

/**
 * A loopback server that records each connection's first byte and, once TLS is up, answers
 * HGETALL emq:fence with this bundle's fence (a RESP2 array); everything decrypted is recorded.
 */
async function tlsServer({ key, cert }) {
  const seen = { firstBytes: [], data: '' };
  const fence = ['protocol', String(bundle.protocol), 'bundle', bundle.version, 'digest', bundle.digest];
  const reply = `*${fence.length}\r\n` + fence.map((f) => `$${Buffer.byteLength(f)}\r\n${f}\r\n`).join('');
  const secure = tls.createServer({ key, cert }, (s) => {
    s.on('data', (d) => {
      seen.data += d.toString('latin1');
      if (/HGETALL/.test(d.toString('latin1'))) s.write(reply);
    });
    s.on('error', () => {});
  });
  secure.on('tlsClientError', () => {});
  await new Promise((resolve) => secure.listen(0, '127.0.0.1', resolve));
  // The front: records each connection's first byte, then relays it to the TLS server.
  const front = net.createServer((sock) => {
    sock.on('error', () => {});
    sock.once('data', (d) => {
      seen.firstBytes.push(d[0]);
      const back = net.connect(secure.address().port, '127.0.0.1');
      back.on('error', () => sock.destroy());
      back.write(d);
      sock.pipe(back).pipe(sock);
    });
  });
  await new Promise((resolve) => front.listen(0, '127.0.0.1', resolve));
  const port = front.address().port;
  return {
    port,
    seen,
    close: async () => {
      await new Promise((resolve) => front.close(resolve));
      await new Promise((resolve) => secure.close(resolve));
    },
  };
}

const open = (url, ca) => EngineSession.open(url, bundle, () => {}, { ca });

test('a server of the ca_file CA for the url host: TLS from the first byte, the fence read', { skip: !hasOpenssl && 'no openssl' }, async () => {
  const p = certs();
  const srv = await tlsServer(p.good);
  try {
    const s = await open(`rediss://localhost:${srv.port}/0`, readCaFile(p.caFile));
    s.close();
    assert.deepEqual(srv.seen.firstBytes, [0x16]); // a TLS handshake record, no plaintext
    assert.match(srv.seen.data, /HGETALL/);
  } finally {
    await srv.close();
  }
});

test('a certificate of another CA, or for another name, is refused: kind engine, nothing sent', { skip: !hasOpenssl && 'no openssl' }, async () => {
  const p = certs();
  for (const [server, url, why] of [
    [p.otherCa, 'rediss://localhost:PORT/0', /certificate/i],
    [p.wrongName, 'rediss://localhost:PORT/0', /ERR_TLS_CERT_ALTNAME_INVALID|altnames/],
    // the good certificate names localhost only (no IP SAN): dialled by address it is refused
    [p.good, 'rediss://127.0.0.1:PORT/0', /ERR_TLS_CERT_ALTNAME_INVALID|altnames/],
  ]) {
    const srv = await tlsServer(server);
    try {
      await assert.rejects(open(url.replace('PORT', srv.port), readCaFile(p.caFile)), (err) => {
        assert.equal(err.kind, 'engine');
        assert.match(err.message, why);
        assert.match(err.message, /TLS/);
        return true;
      });
      assert.deepEqual(srv.seen.firstBytes, [0x16]);
      assert.equal(srv.seen.data, '', 'no command may arrive through a refused connection');
    } finally {
      await srv.close();
    }
  }
});

test('only the ca_file CAs are trusted, even with NODE_TLS_REJECT_UNAUTHORIZED=0', { skip: !hasOpenssl && 'no openssl' }, async () => {
  const p = certs();
  const srv = await tlsServer(p.otherCa);
  const before = process.env.NODE_TLS_REJECT_UNAUTHORIZED;
  process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
  const warn = process.emitWarning;
  process.emitWarning = () => {};
  try {
    await assert.rejects(open(`rediss://localhost:${srv.port}/0`, readCaFile(p.caFile)), { kind: 'engine' });
    assert.equal(srv.seen.data, '');
  } finally {
    process.emitWarning = warn;
    if (before === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
    else process.env.NODE_TLS_REJECT_UNAUTHORIZED = before;
    await srv.close();
  }
});

test('a TLS cluster dials its nodes by the host names CLUSTER NODES announces (R10.4)', () => {
  const { clusterNodeHosts } = require('../src/engine');
  const text = [
    'a1 127.0.0.1:21612@31612,localhost master - 0 1 2 connected 5461-10922',
    'a2 127.0.0.1:21613@31613 master - 0 1 3 connected 10923-16383', // no name announced: left out
    'a3 10.0.0.7:6380@16380,node-3.example,shard-id=ff myself,master - 0 0 1 connected 0-5460',
    'a4 127.0.0.1:21614@31614,,shard-id=ee slave a1 0 1 2 connected',
    '',
  ].join('\n');
  assert.deepEqual(clusterNodeHosts(text), [
    ['127.0.0.1:21612', { host: 'localhost', port: 21612 }],
    ['10.0.0.7:6380', { host: 'node-3.example', port: 6380 }],
  ]);
});
