'use strict';
// THE raw-Redis seam of the Node connector (SPEC §4 "Sole raw-Redis seam").
//
// This is the only module that may load node-redis and the only one that spells an EchoMQ key
// (`emq:{q}:...`, `emq:fence`). test/seam.test.js fails if any other source file does either.
// Everything that reaches the engine goes through an EngineSession below, which sends only:
//   EVALSHA / SCRIPT LOAD of bundle scripts, ZRANGE / ZCARD / HGET for the two reads,
//   HGETALL / HSETNX (in MULTI/EXEC) on the fence, and INCR on a probe key (never under emq:).
//
// Connection policy (fault tolerance, SPEC §4 G8): node-redis must never re-send a command that
// may have run. So every client is created with
//   - disableOfflineQueue: commands issued while not connected fail at once, and on a socket error
//     node-redis rejects *all* queued commands (sent or not) instead of keeping them for later;
//   - a reconnectStrategy that always refuses, and an 'error' listener that closes the client
//     synchronously, because node-redis 4.5 makes one reconnect attempt before it even asks the
//     strategy (and a silent reconnect would also skip the fence check of SPEC §3).
// A dead session is reconnected (fence read again) by the connector on its next verb, never by
// node-redis, and the verb that saw the failure is reported as kind `engine`, not retried.
//
// TLS (SPEC §10, rediss://): the TLS options of every connection are made here (tlsSocketOptions),
// see the comment there; the CA file of connect's ca_file is read here too (readCaFile).

const fs = require('node:fs');
const Module = require('node:module');
const net = require('node:net');
const path = require('node:path');
const tls = require('node:tls');
const { X509Certificate } = require('node:crypto');
const { ConnectorError, engine: engineError, fence: fenceError } = require('./errors');

const PREFIX = 'emq:';
const FENCE_KEY = PREFIX + 'fence';
const DEBIAN_NODE_DIR = '/usr/share/nodejs';

// ---- key schema (SPEC §1) ---------------------------------------------------------------------

/** True when `key` is in EchoMQ's keyspace (a probe key may not be). */
function isEchoMqKey(key) {
  return key.startsWith(PREFIX);
}

/** `emq:{q}:<name>` for one of the queue's keys (pending, active, delayed, dead, seq). */
function queueKey(queue, name) {
  return `${PREFIX}{${queue}}:${name}`;
}

/** The job root `emq:{q}:job:` (ARGV[1] of every script); a job's hash is root + id. */
function jobRoot(queue) {
  return `${PREFIX}{${queue}}:job:`;
}

// ---- node-redis loading -------------------------------------------------------------------------

let redisModule;
/**
 * Resolves node-redis: the normal module path first, then Debian's /usr/share/nodejs (where
 * `apt-get install node-redis` puts it; its own dependencies only resolve with that directory on
 * the module search path, so it is added to NODE_PATH for this process). Prefers the core
 * package `@redis/client` (what `redis` re-exports, minus the module plug-ins: faster to load).
 */
function loadRedis() {
  if (redisModule) return redisModule;
  const attempt = () => {
    for (const name of ['@redis/client', 'redis']) {
      try {
        const mod = require(name);
        if (typeof mod.createClient === 'function') return mod;
      } catch (e) {
        if (e.code !== 'MODULE_NOT_FOUND') throw e;
      }
    }
    return null;
  };
  redisModule = attempt();
  if (!redisModule) {
    const parts = (process.env.NODE_PATH || '').split(path.delimiter).filter(Boolean);
    if (!parts.includes(DEBIAN_NODE_DIR)) {
      process.env.NODE_PATH = [...parts, DEBIAN_NODE_DIR].join(path.delimiter);
      Module._initPaths();
    }
    redisModule = attempt();
  }
  if (!redisModule) {
    throw new Error(`node-redis not found (tried require('@redis/client'), require('redis'), and ${DEBIAN_NODE_DIR}); install Debian's node-redis`);
  }
  skipFailedMasters();
  return redisModule;
}

// ---- TLS (SPEC §10) ------------------------------------------------------------------------------

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/**
 * R10.1: the CA certificates of `file` (connect's ca_file), as PEM strings, each one parsed. Throws
 * an Error naming the file and the cause when it cannot be read, holds no certificate, or holds one
 * that does not parse; validate.js makes that kind `invalid`, before any connection is opened.
 */
function readCaFile(file) {
  let text;
  try {
    text = fs.readFileSync(file, 'latin1');
  } catch (err) {
    throw new Error(`ca_file ${JSON.stringify(file)} cannot be read (${err.code ?? err.message})`);
  }
  const certs = text.match(PEM_CERTIFICATE) ?? [];
  if (certs.length === 0) throw new Error(`ca_file ${JSON.stringify(file)} holds no PEM certificate`);
  certs.forEach((pem, i) => {
    try {
      new X509Certificate(pem); // eslint-disable-line no-new
    } catch (err) {
      throw new Error(`ca_file ${JSON.stringify(file)}: certificate ${i + 1} does not parse (${err.message})`);
    }
  });
  return certs;
}

/**
 * node-redis socket options for `url` (SPEC §10): none for redis://; for rediss://, TLS from the
 * first byte with the chain and the name verified, never switched off:
 *   - tls: true makes node-redis open the socket with tls.connect(socketOptions) (its
 *     RedisSocket #createTlsSocket) and wait for 'secureConnect' before the first command, so
 *     nothing is written before the handshake has verified the server;
 *   - ca: the PEM certificates of ca_file; Node's createSecureContext then trusts those only (its
 *     default root store is replaced, not extended). Without ca_file, Node's default store;
 *   - rejectUnauthorized: true and checkServerIdentity: tls.checkServerIdentity, explicitly, so
 *     NODE_TLS_REJECT_UNAUTHORIZED=0 cannot switch verification off. Node checks the name
 *     `servername || host` (_tls_wrap onConnectSecure), and node-redis always sets `host` (the
 *     url's host; a cluster node's host);
 *   - servername (SNI, and the name checked) = the url's host, for one node only: on a cluster the
 *     options are the `defaults` of every node client, and each node must be checked against its
 *     own host, so there the name checked is each client's `host` (sni: false).
 */
function tlsSocketOptions(url, ca, { sni = true } = {}) {
  const u = new URL(url);
  if (u.protocol !== 'rediss:') return {};
  const options = { tls: true, rejectUnauthorized: true, checkServerIdentity: tls.checkServerIdentity };
  if (ca !== undefined) options.ca = ca;
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  if (sni && host && !net.isIP(host)) options.servername = host;
  return options;
}

/**
 * node-redis 4.5's cluster client learns its nodes from CLUSTER NODES and takes every line whose
 * master id is `-` for a primary it must connect to (CLUSTER_NODES transformReply, then
 * RedisClusterSlots #reset awaits every such client's connect). A primary that died and was
 * replaced keeps such a line, flagged `fail` and serving no slot, until it comes back as a
 * replica: so after an unclean failover no session could open until then (R8.10, R8.11). Such
 * lines (flagged `fail` or `noaddr`, no slot) are left out; a failing primary that still serves
 * slots stays (nothing else serves them yet).
 */
function skipFailedMasters() {
  let nodes;
  try {
    nodes = require('@redis/client/dist/lib/commands/CLUSTER_NODES');
  } catch (e) {
    return; // another node-redis layout: its own parsing stands
  }
  if (nodes.emqSkipsFailedMasters || typeof nodes.transformReply !== 'function') return;
  const parse = nodes.transformReply;
  nodes.transformReply = (reply) => parse(reply).filter(
    (n) => !(n.slots?.length === 0 && n.flags?.some((f) => f === 'fail' || f === 'noaddr')),
  );
  nodes.emqSkipsFailedMasters = true;
}

// ---- errors ---------------------------------------------------------------------------------------

const isNoScript = (err) => typeof err?.message === 'string' && err.message.startsWith('NOSCRIPT');

/** Any failure of the client (error reply, lost connection, closed client) is kind `engine`. */
function asEngineError(err) {
  if (err instanceof ConnectorError) return err;
  const what = err?.constructor?.name === 'ErrorReply' ? 'engine replied' : 'engine connection failed';
  // A refused TLS handshake says why: Node's verify code (CERT_HAS_EXPIRED,
  // ERR_TLS_CERT_ALTNAME_INVALID, SELF_SIGNED_CERT_IN_CHAIN, UNABLE_TO_VERIFY_LEAF_SIGNATURE, ...).
  const code = typeof err?.code === 'string' && what !== 'engine replied' ? ` [${err.code}]` : '';
  const tlsWhy = code && /CERT|TLS|SSL|SIGNATURE|ISSUER/.test(err.code) ? ' (TLS: the server certificate was refused)' : '';
  return engineError(`${what}${tlsWhy}: ${err?.message ?? String(err)}${code}`);
}

// ---- sessions -------------------------------------------------------------------------------------

class EngineSession {
  /**
   * Opens one connection to `url` and runs the fence check (SPEC §3). Resolves to a ready session,
   * or rejects with kind `fence` (the connection is closed, no script was sent) or `engine`.
   * `log(line)` receives warnings (a different digest).
   */
  static async open(url, bundle, log = () => {}, { ca } = {}) {
    const { createClient } = loadRedis();
    const session = new EngineSession(bundle, log);
    const client = createClient({
      url,
      disableOfflineQueue: true,
      socket: {
        connectTimeout: 5000,
        reconnectStrategy: () => new Error('reconnects are the connector\'s job'),
        ...tlsSocketOptions(url, ca),
      },
    });
    session.client = client;
    client.on('error', (err) => session._onClientError(err));
    try {
      await client.connect();
    } catch (err) {
      session._kill();
      // A failed first connection surfaces as ReconnectStrategyError (our strategy's message);
      // its socketError names the cause (a refused certificate, say).
      throw asEngineError(err?.socketError ?? err);
    }
    try {
      await session._checkFence();
    } catch (err) {
      session.close();
      throw asEngineError(err);
    }
    return session;
  }

  constructor(bundle, log) {
    this.bundle = bundle;
    this.log = log;
    this.client = null;
    this.alive = true;
  }

  _onClientError(err) {
    if (this.alive) this.log(`connection lost: ${err?.message ?? err}`);
    this._kill();
  }

  /** Marks the session dead and closes the client now, so node-redis cannot reconnect. */
  _kill() {
    this.alive = false;
    const client = this.client;
    if (client && client.isOpen) {
      // Synchronous part: flushes every queued command with an error and destroys the socket.
      client.disconnect().catch(() => {});
    }
  }

  close() {
    this._kill();
  }

  /** One command; rejects with the client's own error (an ErrorReply, a socket error...). */
  _sendRaw(args) {
    if (!this.alive) return Promise.reject(engineError('engine connection is closed'));
    return this.client.sendCommand(args);
  }

  /** One command; any failure is kind `engine`. */
  async _send(args) {
    try {
      return await this._sendRaw(args);
    } catch (err) {
      throw asEngineError(err);
    }
  }

  /** Sends every command of `argsList` in one pipeline; settles all of them, in order. */
  async _pipeline(argsList) {
    if (!this.alive) throw engineError('engine connection is closed');
    return Promise.allSettled(argsList.map((args) => this.client.sendCommand(args)));
  }

  async _readFence() {
    const flat = await this._send(['HGETALL', FENCE_KEY]);
    const fence = {};
    for (let i = 0; i + 1 < flat.length; i += 2) fence[flat[i]] = flat[i + 1];
    return fence;
  }

  async _checkFence() {
    const own = { protocol: String(this.bundle.protocol), bundle: this.bundle.version, digest: this.bundle.digest };
    let fence = await this._readFence();
    if (fence.protocol === undefined) {
      // Absent: install ours with one HSETNX per field in one MULTI/EXEC, then read it again.
      const multi = this._fenceMulti();
      for (const [field, value] of Object.entries(own)) multi.addCommand(['HSETNX', FENCE_KEY, field, value]);
      try {
        await multi.exec();
      } catch (err) {
        throw asEngineError(err);
      }
      fence = await this._readFence();
    }
    if (fence.protocol !== own.protocol) {
      throw fenceError(
        `fence refuses this connector: the engine's fence names protocol ${fence.protocol ?? '(none)'} ` +
          `(bundle ${fence.bundle ?? '?'}), this connector speaks protocol ${own.protocol} (bundle ${own.bundle})`,
      );
    }
    if (fence.digest !== own.digest) {
      this.log(`warning: fence digest ${fence.digest} differs from this bundle's ${own.digest} (protocol ${own.protocol} on both sides)`);
    }
  }

  /** The MULTI of the fence install, on the connection that owns `emq:fence`. */
  _fenceMulti() {
    return this.client.multi();
  }

  _scriptCall(name, queue, args) {
    const script = this.bundle.scripts[name];
    const keys = script.keys.map((k) => queueKey(queue, k));
    return ['EVALSHA', script.sha, String(keys.length), ...keys, jobRoot(queue), ...args.map(String)];
  }

  /** SCRIPT LOAD of the bundle's bytes for `name`; the engine must answer the bundle's sha. */
  async _load(name) {
    const script = this.bundle.scripts[name];
    const sha = await this._send(['SCRIPT', 'LOAD', script.source]);
    if (sha !== script.sha) throw engineError(`SCRIPT LOAD of ${name} returned ${sha}, expected ${script.sha}`);
  }

  /** One transition: EVALSHA; on NOSCRIPT, SCRIPT LOAD once and retry once. */
  async evalScript(name, queue, args) {
    const call = this._scriptCall(name, queue, args);
    try {
      return await this._sendRaw(call);
    } catch (err) {
      if (!isNoScript(err)) throw asEngineError(err); // NOSCRIPT is the only reply retried
    }
    await this._load(name);
    return this._send(call);
  }

  /**
   * `count` calls of script `name` with the same arguments, pipelined. NOSCRIPT replies (the
   * script did not run) are re-sent once after one SCRIPT LOAD; any other failure is thrown
   * without re-sending anything. Resolves to the replies in order.
   */
  async evalPipelined(name, queue, args, count) {
    const call = this._scriptCall(name, queue, args);
    return this._evalCalls(name, Array.from({ length: count }, () => call));
  }

  /**
   * One call of script `name` per entry of `queues` (in that order, same `args`), pipelined like
   * evalPipelined: `batch` over several queues (R4.12). On one node a pipeline mixes queues.
   */
  async evalPipelinedOver(name, queues, args) {
    return this._evalCalls(name, queues.map((queue) => this._scriptCall(name, queue, args)));
  }

  async _evalCalls(name, calls) {
    const count = calls.length;
    const settled = await this._pipeline(calls);
    const replies = new Array(count);
    const missed = [];
    let failure = null;
    settled.forEach((s, i) => {
      if (s.status === 'fulfilled') replies[i] = s.value;
      else if (isNoScript(s.reason)) missed.push(i);
      else failure ??= s.reason;
    });
    if (failure) throw asEngineError(failure);
    if (missed.length) {
      await this._load(name);
      const again = await this._pipeline(missed.map((i) => calls[i]));
      again.forEach((s, j) => {
        if (s.status === 'fulfilled') replies[missed[j]] = s.value;
        else failure ??= s.reason;
      });
      if (failure) throw asEngineError(failure);
    }
    return replies;
  }

  /** ZRANGE of pending, then HGET payload per id, pipelined; ids whose hash went are left out. */
  async browse(queue, offset, limit) {
    if (limit === 0) return [];
    const ids = await this._send(['ZRANGE', queueKey(queue, 'pending'), String(offset), String(offset + limit - 1)]);
    if (ids.length === 0) return [];
    const root = jobRoot(queue);
    const settled = await this._pipeline(ids.map((id) => ['HGET', root + id, 'payload']));
    const out = [];
    settled.forEach((s, i) => {
      if (s.status === 'rejected') throw asEngineError(s.reason);
      if (s.value !== null && s.value !== undefined) out.push({ id: ids[i], payload: s.value });
    });
    return out;
  }

  async pendingSize(queue) {
    return this._send(['ZCARD', queueKey(queue, 'pending')]);
  }

  /** n INCR of `key` (never an EchoMQ key) as one pipeline; the n replies in order. */
  async probe(key, n) {
    if (isEchoMqKey(key)) throw new Error('probe key under emq: reached the engine layer');
    const settled = await this._pipeline(Array.from({ length: n }, () => ['INCR', key]));
    return settled.map((s) => {
      if (s.status === 'rejected') throw asEngineError(s.reason);
      return s.value;
    });
  }
}

// ---- Sentinel (SPEC §11) ------------------------------------------------------------------------

const SENTINEL_ASK_MS = 1000; // R11.1: each Sentinel's share (connect, AUTH, the answer)
const CANDIDATE_MS = 2000; // R11.2: the named node's connect, TLS, AUTH, ROLE and SELECT, all of it
const DISCOVERY_MS = 8000; // the whole discovery, inside R5.8's 10 s for `connect`

/**
 * `host:port` (or `[v6]:port`) -> { host, port }, or null when it is not one: a non-empty host
 * (no `:` unless bracketed) and a decimal port 1..65535.
 */
function parseHostPort(address) {
  if (typeof address !== 'string') return null;
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:[\]/@?#]+)):([0-9]{1,5})$/.exec(address);
  if (!m) return null;
  const port = Number(m[3]);
  if (port < 1 || port > 65535) return null;
  return { host: m[1] ?? m[2], port };
}

/** `url` with its host and port replaced and no `/db` (node-redis then sends no SELECT). */
function urlAt(url, host, port) {
  const u = new URL(url);
  u.host = `${net.isIPv6(host) ? `[${host}]` : host}:${port}`;
  u.pathname = '';
  return u.href;
}

/** The url's database (R5.12), 0 when it names none. */
function databaseOf(url) {
  const db = new URL(url).pathname.replace(/^\//, '');
  return db === '' ? 0 : Number(db);
}

/**
 * A node-redis client for `url` that never re-sends and never reconnects by itself (as every
 * client of this module), for a step bounded to `ms` (see bounded), TLS per tlsSocketOptions (rediss://: TLS from the first byte, `ca` only,
 * the name checked against the url's host). Its 'error' listener closes it at once (node-redis
 * would otherwise reconnect: socket #onSocketError checks isOpen after emitting), then tells
 * `onError`, if any.
 */
function oneShotClient(url, ca, ms, onError = () => {}) {
  const { createClient } = loadRedis();
  // The socket's own connect timeout ends before bounded()'s, so when that fires the socket is
  // either gone or known to the client (whose disconnect then destroys it): none is left behind.
  const connectTimeout = Math.max(1, Math.floor(ms * 0.8));
  const client = createClient({
    url,
    disableOfflineQueue: true,
    socket: {
      connectTimeout,
      reconnectStrategy: () => new Error('reconnects are the connector\'s job'),
      ...tlsSocketOptions(url, ca),
    },
  });
  client.on('error', (err) => {
    if (client.isOpen) client.disconnect().catch(() => {});
    onError(err);
  });
  return client;
}

/** Closes `client` now (node-redis 4.5 `disconnect`: flushes its queue, destroys the socket; no QUIT). */
function closeClient(client) {
  if (client.isOpen) client.disconnect().catch(() => {});
}

/**
 * Resolves `work(client)` on a client connected within `ms` (connect and AUTH, then what `work`
 * sends), or rejects with an Error whose message says why: refused, a failed handshake, no answer
 * within `ms`, an error reply. The client is left open on success (the caller owns it), and closed
 * on any failure, a timeout included (which also rejects every command still waiting).
 */
function bounded(client, ms, work) {
  return new Promise((resolve, reject) => {
    let done = false;
    const timer = setTimeout(() => {
      if (done) return;
      done = true;
      closeClient(client);
      reject(new Error(`no answer within ${ms} ms`));
    }, ms);
    (async () => {
      try {
        await client.connect();
      } catch (err) {
        throw err?.socketError ?? err;
      }
      return work(client);
    })().then(
      (value) => {
        clearTimeout(timer);
        if (done) return;
        done = true;
        resolve(value);
      },
      (err) => {
        clearTimeout(timer);
        closeClient(client);
        if (done) return;
        done = true;
        reject(err);
      },
    );
  });
}

/** A short reason for a failed step (Node's code when it has one: ECONNREFUSED, CERT_..., ...). */
function reasonOf(err) {
  const code = typeof err?.code === 'string' ? ` [${err.code}]` : '';
  const what = err?.constructor?.name === 'ErrorReply' ? 'answered ' : '';
  return `${what}${err?.message ?? String(err)}${code}`;
}

/**
 * R11.1: asks the Sentinel at `node` (`host:port`) `SENTINEL get-master-addr-by-name <name>` on a
 * connection of its own, authenticated as the url's user (node-redis sends AUTH from the url, and
 * no SELECT: the url handed to it names no database), over TLS for rediss:// with the name checked
 * against the Sentinel's host. Nothing else is sent to a Sentinel (R11.4). The connection is
 * closed before this returns. Resolves to { host, port }, or rejects with the reason.
 */
async function askSentinel(url, node, name, ca, ms) {
  const { host, port } = parseHostPort(node);
  const client = oneShotClient(urlAt(url, host, port), ca, ms);
  try {
    const reply = await bounded(client, ms, (c) => c.sendCommand(['SENTINEL', 'get-master-addr-by-name', name]));
    if (reply === null || reply === undefined) throw new Error(`does not know the name ${JSON.stringify(name)} (null)`);
    const at = Array.isArray(reply) && reply.length === 2 ? parseHostPort(`${net.isIPv6(String(reply[0])) ? `[${reply[0]}]` : reply[0]}:${reply[1]}`) : null;
    if (!at) throw new Error(`answered ${JSON.stringify(reply)}, not a host and a port`);
    return at;
  } finally {
    closeClient(client);
  }
}

/**
 * R11.2: a connection to the node a Sentinel named (`at`), authenticated as the url's user; its
 * first command after AUTH is `ROLE`. Resolves to the open client when the reply's first element is
 * `master`, after selecting the url's database (so nothing but AUTH and ROLE reaches a node that is
 * not the primary); otherwise the client is closed, nothing else sent on it, and this rejects with
 * the reason. All of it, SELECT included, within `ms`: a node that answers ROLE and then nothing
 * must not hold the connect past its share (node-redis has no reply timeout of its own).
 * `onError` is the client's 'error' listener (see oneShotClient).
 */
async function openPrimary(url, at, ca, ms, onError) {
  const client = oneShotClient(urlAt(url, at.host, at.port), ca, ms, (err) => onError(client, err));
  const db = databaseOf(url);
  await bounded(client, ms, async (c) => {
    const role = await c.sendCommand(['ROLE']);
    const first = Array.isArray(role) ? String(role[0]) : String(role);
    if (first !== 'master') throw new Error(`its ROLE is ${JSON.stringify(first)}, not master`);
    if (db !== 0) await c.select(db);
  });
  return client;
}

/**
 * R11.1/R11.2: asks the Sentinels of `sentinel.nodes` in order, each within SENTINEL_ASK_MS, and
 * connects to the first named node whose ROLE is master. Resolves to that open client; rejects
 * with kind `engine` naming what each Sentinel did when none leads to a primary. Never remembers
 * an address: every call asks again.
 */
async function discoverPrimary(url, sentinel, ca, log, onError) {
  const deadline = Date.now() + DISCOVERY_MS;
  const what = [];
  let answered = 0;
  let knew = 0;
  for (const node of sentinel.nodes) {
    const left = deadline - Date.now();
    if (left <= 0) {
      what.push(`${node}: not asked (discovery out of time)`);
      continue;
    }
    let at;
    try {
      at = await askSentinel(url, node, sentinel.name, ca, Math.min(SENTINEL_ASK_MS, left));
    } catch (err) {
      if (err?.constructor?.name === 'ErrorReply' || /^does not know|^answered/.test(err?.message ?? '')) answered++;
      what.push(`Sentinel ${node}: ${reasonOf(err)}`);
      continue;
    }
    answered++;
    knew++;
    const named = `${net.isIPv6(at.host) ? `[${at.host}]` : at.host}:${at.port}`;
    try {
      const client = await openPrimary(url, at, ca, Math.max(1, Math.min(CANDIDATE_MS, deadline - Date.now())), onError);
      return { client, address: named, sentinel: node };
    } catch (err) {
      what.push(`Sentinel ${node} named ${named}: ${reasonOf(err)}`);
      log(`Sentinel ${node} named ${named}, not used: ${reasonOf(err)}`);
    }
  }
  const why = answered === 0
    ? 'no Sentinel answered'
    : knew === 0
      ? `no Sentinel knows the name ${JSON.stringify(sentinel.name)}`
      : 'no Sentinel named a primary that answers ROLE master';
  throw engineError(`Sentinel discovery of ${JSON.stringify(sentinel.name)} failed: ${why} (${what.join('; ')})`);
}

const isReadOnly = (err) => err?.constructor?.name === 'ErrorReply' && /^READONLY\b/.test(err.message ?? '');

/**
 * A session behind Sentinel (`connect` with `sentinel`, SPEC §11): one connection to the primary
 * the Sentinels name, found afresh at every open (R11.1, R11.2), fence first (R3.1, R3.5). It is
 * an EngineSession in everything else (EVALSHA first, pipelines, no re-send). A lost connection
 * (the 'error' listener) or a READONLY reply (R11.3: the node was demoted) closes the connection
 * and marks the session dead; the call that met it fails with kind `engine` and is not sent again,
 * and the connector's next verb opens the session again: discovery, ROLE, fence, then its script.
 */
class SentinelEngineSession extends EngineSession {
  static async open(url, bundle, log = () => {}, { ca, sentinel } = {}) {
    loadRedis();
    const session = new SentinelEngineSession(bundle, log);
    const onError = (client, err) => {
      if (session.client === client) session._onClientError(err);
    };
    const { client, address, sentinel: asked } = await discoverPrimary(url, sentinel, ca, log, onError);
    session.client = client;
    session.primary = address;
    log(`primary ${address} (named by Sentinel ${asked}, ROLE master)`);
    try {
      await session._checkFence();
    } catch (err) {
      session.close();
      throw asEngineError(err);
    }
    return session;
  }

  constructor(bundle, log) {
    super(bundle, log);
    this.primary = null;
  }

  /** R11.3: READONLY says the primary moved; the connection is closed (R5.13), the session dead. */
  _staleOn(err) {
    if (!isReadOnly(err) || !this.alive) return;
    this.log(`primary ${this.primary} answered READONLY: connection closed, the next call asks the Sentinels again`);
    this._kill();
  }

  _sendRaw(args) {
    return super._sendRaw(args).catch((err) => {
      this._staleOn(err);
      throw err;
    });
  }

  async _pipeline(argsList) {
    const settled = await super._pipeline(argsList);
    const stale = settled.find((s) => s.status === 'rejected' && isReadOnly(s.reason));
    if (stale) this._staleOn(stale.reason);
    return settled;
  }
}

// ---- cluster mode (SPEC §8) ---------------------------------------------------------------------

/** CRC16/XMODEM, the hash of Valkey Cluster's key slots. */
const CRC16_TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i << 8;
    for (let k = 0; k < 8; k++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
    t[i] = c;
  }
  return t;
})();

/** The cluster slot of `key` (0..16383), honouring a `{hash tag}` as Valkey does. */
function slotOf(key) {
  let bytes = Buffer.from(key, 'utf8');
  const open = bytes.indexOf(0x7b); // {
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1); // }
    if (close > open + 1) bytes = bytes.subarray(open + 1, close);
  }
  let crc = 0;
  for (const b of bytes) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ b) & 0xff];
  return crc & 0x3fff;
}

/**
 * CLUSTER NODES text -> [["ip:port", { host, port }]] for every node that announces a host name
 * (its address field is "ip:port@cport,hostname[,aux=...]"); the others are left out.
 */
function clusterNodeHosts(text) {
  const out = [];
  for (const line of text.split('\n')) {
    const field = line.split(' ')[1];
    if (!field) continue;
    const [addr, hostname] = field.split(',');
    const m = /^(.*):(\d+)(?:@\d+)?$/.exec(addr);
    if (!m || !hostname || hostname.includes('=')) continue;
    out.push([`${m[1]}:${m[2]}`, { host: hostname, port: Number(m[2]) }]);
  }
  return out;
}

/** The key a command is routed by: EVALSHA's first KEYS entry, else the first argument. */
function routingKey(args) {
  return args[0] === 'EVALSHA' ? args[3] : args[1];
}

const isRedirect = (err) => typeof err?.message === 'string' && /^(MOVED|ASK) /.test(err.message);

/**
 * R8.13: `host:port` of the node a redirect names. A cluster with `cluster-preferred-endpoint-type
 * unknown-endpoint` names no host (`MOVED 12 :7001`, `ASK 12 :7001`): the unnamed host is `from`,
 * the host of the node that sent the redirect (of the connection it came over). Any other address
 * is kept as it is (an IPv6 one, `::1:7001`, has a host before its last colon; `?:7001` is a
 * misconfigured cluster, not judged, R8.13). Without `from` an empty host stays empty.
 */
function endpointOf(address, from) {
  return from && address.lastIndexOf(':') === 0 ? `${from}${address}` : address;
}

/** The host a node client dials (a CLUSTER NODES address, or over TLS the announced name). */
const hostOf = (client) => client?.options?.socket?.host;

/**
 * `MOVED|ASK <slot> <host:port>` parsed: { ask, slot, address }, or null for any other error.
 * `from`: the host of the node that answered, for a redirect that names none (R8.13).
 */
function redirectOf(err, from) {
  const m = typeof err?.message === 'string' && /^(MOVED|ASK) (\d+) (\S+)/.exec(err.message);
  return m ? { ask: m[1] === 'ASK', slot: Number(m[2]), address: endpointOf(m[3], from) } : null;
}
const REDIRECT_ROUNDS = 16; // rounds of MOVED/ASK followed for one call before it is kind `engine`

/**
 * The `defaults` of createCluster: node-redis makes every node client from them, merged with that
 * node's own options (@redis/client cluster/cluster-slots.js #clientOptionsDefaults, used by
 * #initiateClient for each client it makes: the root's discovery client, each primary's client
 * #reset opens from CLUSTER NODES (#initiateClientForNode, `{socket: {host, port}, readonly}`
 * only), and the discovery client a MOVED/ASK rediscovery opens from a node's options). Only the
 * root's options hold the url, so everything the url says that every node needs is here:
 *   - the user and password (AUTH on every node, R9.1);
 *   - the database (R8.5): a redirect names a node, never a database. RedisClient #initiateOptions
 *     makes `database` the client's selected db, and its socketInitiator, run at every connect
 *     of the socket (a first one and any reconnect, socket.js #connect), queues `SELECT <db>` with
 *     `asap` before anything else of the session (after AUTH, which it queues in front of it).
 *     A refused SELECT fails that connect (the socket is destroyed, the error is the engine's
 *     reply): the connector never judges the number itself. Database 0 needs no SELECT;
 *   - the no-resend options of a single-node session (disableOfflineQueue, a refusing
 *     reconnectStrategy) and the TLS options of every node (node-redis takes TLS from the seed's
 *     url only, #2477).
 */
function clusterDefaults(url, ca) {
  const parsed = new URL(url);
  const defaults = {
    disableOfflineQueue: true,
    socket: {
      connectTimeout: 5000,
      reconnectStrategy: () => new Error('reconnects are the connector\'s job'),
      ...tlsSocketOptions(url, ca, { sni: false }),
    },
  };
  if (parsed.username) defaults.username = decodeURIComponent(parsed.username);
  if (parsed.password) defaults.password = decodeURIComponent(parsed.password);
  const db = databaseOf(url);
  if (db !== 0) defaults.database = db;
  return defaults;
}

/**
 * A session on a Valkey Cluster (`connect` with `"cluster": true`, SPEC §8), on node-redis's
 * cluster client (`createCluster`, @redis/client 1.4.x in node-redis 4.5.1):
 *   - rootNodes: the url (the seed); `defaults` (clusterDefaults) carries the url's user,
 *     password and database to every node, and the same no-resend client options as a
 *     single-node session (disableOfflineQueue, a refusing reconnectStrategy); useReplicas:
 *     false, so getSlotMaster / the library route to primaries only, and no node client is
 *     created for a replica (RedisClusterSlots #reset).
 *   - every call goes to the primary of its keys' slot (`getSlotMaster(slot).client`). A call's
 *     share on each node is one pipeline on that node's client (all issued in one tick, which
 *     node-redis writes as one batch); the nodes are served concurrently, each in order.
 *   - ASK <slot> <host:port> (the command did not run, R8.6): ASKING and the call on the named
 *     node's client (found among getMasters() by its announced address), in one write; the slot
 *     map is left as it is. Not node-redis's #execute, which after ASK hides which node answered
 *     (so a NOSCRIPT from the migration's target was loaded on the source, R8.8), rediscovers
 *     the map, and sends ASKING apart from the call. Only a node with no client yet goes through
 *     cluster.sendCommand (its rediscovery makes the client).
 *   - a redirect that names no host (`ASK 12 :7001`, `MOVED 12 :7001`: a cluster with
 *     `cluster-preferred-endpoint-type unknown-endpoint`, R8.13) names a node on the host of the
 *     node that answered it (endpointOf): ASKING and the call go to that host:port, never to the
 *     empty host. node-redis cannot map such an address (`Cannot find node :7001`); the connector
 *     follows it itself (_askedNowhere). MOVED's address is not used: the refreshed map routes.
 *   - MOVED (did not run either): the first MOVED-ed call of a round is re-sent through
 *     `cluster.sendCommand`, whose #execute rediscovers the slot map and re-routes it, and
 *     re-throws every other error as it is, so it never re-sends after a connection error; the
 *     other MOVED-ed calls go out again next round, routed by the refreshed map. TRYAGAIN and
 *     CLUSTERDOWN are replies like any other: kind `engine`.
 *   - NOSCRIPT from a node: SCRIPT LOAD on the client that answered it (a redirect's target,
 *     never the slot map's primary by default, R8.2/R8.8), in the same write as the calls sent
 *     again there (after ASKING again for a call that came by ASK).
 *   - a connection failure anywhere: node-redis emits 'error' on the node client, which
 *     RedisClusterSlots forwards to the cluster's 'error'; the listener closes every node client
 *     synchronously, which rejects every queued or in-flight command (disableOfflineQueue →
 *     commands-queue flushAll) and stops node-redis's own reconnect (socket #onSocketError checks
 *     isOpen after emitting). The verb fails with kind `engine`; the connector opens the whole
 *     session again on the next verb, fence first (§7).
 */
class ClusterEngineSession extends EngineSession {
  static async open(url, bundle, log = () => {}, { ca, seeds = [] } = {}) {
    const { createCluster } = loadRedis();
    if (typeof createCluster !== 'function') throw engineError('this node-redis has no cluster client');
    const parsed = new URL(url);
    const defaults = clusterDefaults(url, ca);
    // The url first, then every node the session's last slot map named (R8.11), one at a time:
    // node-redis's own rootNodes stop at the first one whose connection fails.
    const roots = [url];
    for (const address of seeds) {
      const at = new URL(url);
      at.host = address;
      if (!roots.includes(at.href)) roots.push(at.href);
    }
    let session = null;
    let last = null;
    for (const root of roots) {
      session = new ClusterEngineSession(bundle, log);
      const mine = session;
      const options = { rootNodes: [{ url: root }], defaults, useReplicas: false, maxCommandRedirections: REDIRECT_ROUNDS };
      try {
        if (parsed.protocol === 'rediss:') {
          // R10.4: node-redis learns the nodes from CLUSTER NODES and dials each at its IP address
          // (commands/CLUSTER_NODES transformNodeAddress drops the ",hostname" the engine
          // announces), which no certificate names. nodeAddressMap (RedisClusterSlots
          // #getNodeAddress, consulted for every node client it creates) gives it the host name
          // instead, learnt here from the root, so each node is dialled, and its certificate
          // checked, by its announced name. A node with no name known stays at its address: its
          // certificate check then fails (never skipped).
          session.hosts = new Map();
          session.tlsUrl = root;
          session.tlsCa = ca;
          await session._learnHosts(null);
          options.nodeAddressMap = (address) => mine.hosts.get(address);
        }
        const cluster = createCluster(options);
        session.cluster = cluster;
        cluster.on('error', (err) => mine._onClientError(err));
        await cluster.connect();
        if (!session.alive) throw engineError('engine connection failed while learning the slot map');
        last = null;
        break;
      } catch (err) {
        session._kill();
        // A refused or failed first connection surfaces as ReconnectStrategyError, whose message
        // is our strategy's; its socketError names the cause (a SELECT or AUTH the seed refused:
        // the engine's reply). One that failed on a node client after the seed's (#reset inside
        // #discoverNodes) surfaces as RootNodesUnavailableError only: the engine's words are in
        // the first error node-redis reported on the way.
        const why = err?.socketError ?? (err?.constructor?.name === 'RootNodesUnavailableError' ? mine.firstError : null) ?? err;
        last = asEngineError(why?.socketError ?? why);
      }
    }
    if (last) throw last;
    session.known = session._mastersNow();
    try {
      await session._checkFence();
    } catch (err) {
      session.close();
      throw asEngineError(err);
    }
    return session;
  }

  constructor(bundle, log) {
    super(bundle, log);
    this.firstError = null; // the first error node-redis reported (connect's cause, see open)
    this.cluster = null;
    this.known = []; // host:port of the primaries the slot map named last (seeds for a reopen)
    this.hosts = null; // rediss:// only: "ip:port" of CLUSTER NODES -> { host, port } announced
  }

  /**
   * Reads CLUSTER NODES (from `client`, or from a connection of its own to the seed, over the
   * session's TLS, closed before it returns) into this.hosts: each node's "ip:port" -> its
   * announced host name ("ip:port@cport,hostname[,...]"), when it announces one.
   */
  async _learnHosts(client) {
    let text;
    if (client) {
      text = await client.sendCommand(['CLUSTER', 'NODES']);
    } else {
      const { createClient } = loadRedis();
      // Made from the url: AUTH as its user and SELECT its database (R8.5) before CLUSTER NODES.
      const seed = createClient({
        url: this.tlsUrl,
        disableOfflineQueue: true,
        socket: {
          connectTimeout: 5000,
          reconnectStrategy: () => new Error('reconnects are the connector\'s job'),
          ...tlsSocketOptions(this.tlsUrl, this.tlsCa),
        },
      });
      seed.on('error', () => {});
      try {
        await seed.connect();
        text = await seed.sendCommand(['CLUSTER', 'NODES']);
      } finally {
        if (seed.isOpen) await seed.disconnect().catch(() => {});
      }
    }
    for (const [address, host] of clusterNodeHosts(String(text))) this.hosts.set(address, host);
  }

  _onClientError(err) {
    this.firstError ??= err;
    super._onClientError(err);
  }

  /** Marks the session dead and closes every node client now (see the class comment). */
  _kill() {
    const wasAlive = this.alive;
    this.alive = false;
    const now = this._mastersNow();
    if (now.length) this.known = now;
    if (this.cluster && wasAlive) this.cluster.disconnect().catch(() => {});
  }

  /** `host:port` of every primary the slot map named last: seeds for the session's next open. */
  knownNodes() {
    return this.known;
  }

  _mastersNow() {
    const out = [];
    for (const node of this.cluster?.getMasters?.() ?? []) {
      const socket = node.client?.options?.socket;
      if (socket?.host && socket?.port) out.push(`${socket.host}:${socket.port}`);
    }
    return out;
  }

  _clientFor(args) {
    return this.cluster.getSlotMaster(slotOf(routingKey(args))).client;
  }

  _fenceMulti() {
    return this.cluster.getSlotMaster(slotOf(FENCE_KEY)).client.multi();
  }

  _sendRaw(args) {
    return this._dispatch([args]).then(([s]) => {
      if (s.status === 'rejected') throw s.reason;
      return s.value;
    });
  }

  _pipeline(argsList) {
    return this._dispatch(argsList);
  }

  /**
   * Sends every command to the primary owning its slot: one pipeline per node, nodes in parallel,
   * each node's share in the order given (so in order within each queue). Resolves to
   * allSettled-style results in the order of `argsList`.
   *
   * Each call is re-sent only after a reply that says it did not run, and always to the node
   * that reply names (never after a connection error, a timeout or any other reply, R4.17):
   *   - `ASK <slot> <host:port>` (R8.6): `ASKING` and the call on the named node, in one write (so
   *     no other command of this client can come between them); the slot map stays as it was. An
   *     empty host (`ASK 12 :7001`, R8.13) is the host of the node that answered;
   *   - `MOVED`: the first MOVED-ed call of a round goes again through `cluster.sendCommand`,
   *     whose #execute refreshes the slot map and re-routes it; the others follow next round,
   *     routed by the refreshed map;
   *   - `NOSCRIPT` from a node (only with `script`, R8.2/R8.8): `SCRIPT LOAD` on THAT node (the one
   *     that answered: a redirect's target, not the slot map's primary), first in the next write
   *     to it, then the call again there, after `ASKING` again if it had come by `ASK`. At most
   *     one load per node per dispatch: a node that says NOSCRIPT after it loaded is an error.
   */
  async _dispatch(argsList, script = null) {
    if (!this.alive) throw engineError('engine connection is closed');
    const results = new Array(argsList.length);
    const route = new Array(argsList.length).fill(null); // null: the slot map; else { client, asking }
    const loadOn = new Set(); // clients that answered NOSCRIPT: SCRIPT LOAD first in the next write
    const loadedOn = new Set(); // clients this dispatch loaded on
    let todo = argsList.map((_, i) => i);
    for (let round = 0; todo.length; round++) {
      if (round >= REDIRECT_ROUNDS) throw engineError(`still redirected after ${REDIRECT_ROUNDS} rounds of MOVED/ASK/NOSCRIPT`);
      const shares = new Map(); // node client -> indexes, in order
      for (const i of todo) {
        const client = route[i]?.client ?? this._clientFor(argsList[i]);
        if (!shares.has(client)) shares.set(client, []);
        shares.get(client).push(i);
      }
      const sent = [];
      for (const [client, idx] of shares) {
        let loaded = null;
        if (loadOn.has(client)) {
          loadOn.delete(client);
          loadedOn.add(client);
          loaded = Promise.allSettled([client.sendCommand(['SCRIPT', 'LOAD', script.source])]);
        }
        const replies = idx.map((i) => {
          // ASKING's own reply is OK; if the connection failed, the call after it fails too.
          if (route[i]?.asking) client.sendCommand(['ASKING']).catch(() => {});
          return client.sendCommand(argsList[i]);
        });
        sent.push({ client, idx, loaded, replies: Promise.allSettled(replies) });
      }
      let failure = null;
      const again = []; // [index, reply error, client that answered]
      for (const { client, idx, loaded, replies } of sent) {
        if (loaded) {
          const [l] = await loaded;
          if (l.status === 'rejected') failure ??= l.reason;
          else if (l.value !== script.sha) failure ??= engineError(`SCRIPT LOAD of ${script.name} returned ${l.value}, expected ${script.sha}`);
        }
        (await replies).forEach((s, k) => {
          const retry = s.status === 'rejected' && (isRedirect(s.reason) || (script && isNoScript(s.reason)));
          if (retry) again.push([idx[k], s.reason, client]);
          else results[idx[k]] = s;
        });
      }
      if (failure) throw asEngineError(failure);
      // R8.11: READONLY says the node was demoted (a failover). Those calls failed (they did not
      // run and are not sent again, R4.17); the session closes, so the next verb opens it again:
      // a fresh slot map, new connections, the fence read first.
      if (results.some((r) => r?.status === 'rejected' && /^READONLY/.test(r.reason?.message ?? ''))) {
        this._kill();
      }
      todo = [];
      again.sort((a, b) => a[0] - b[0]);
      let mapRefreshed = false;
      for (const [i, err, client] of again) {
        const args = argsList[i];
        // R8.13: a redirect with no host names a node on the host of `client`, which answered it.
        const reply = redirectOf(err, hostOf(client));
        if (!reply) {
          // NOSCRIPT from `client`: load there, then the call again there (R8.2, R8.8).
          if (loadedOn.has(client)) {
            results[i] = { status: 'rejected', reason: err };
            continue;
          }
          loadOn.add(client);
          route[i] = { client, asking: route[i]?.asking ?? false };
          todo.push(i);
        } else if (reply.ask) {
          const target = this._clientAt(reply.address);
          if (target) {
            route[i] = { client: target, asking: true };
            todo.push(i);
            continue;
          }
          // A node this session has no client for: node-redis rediscovers the nodes and sends
          // ASKING and the call there. A NOSCRIPT from it is answered on that node (now known).
          const s = await this._viaLibrary(args);
          const lost = this._askedNowhere(s, args);
          if (lost) {
            route[i] = { client: lost, asking: true };
            todo.push(i);
            continue;
          }
          const named = this._clientAt(reply.address);
          if (script && s.status === 'rejected' && isNoScript(s.reason) && named && !loadedOn.has(named)) {
            loadOn.add(named);
            route[i] = { client: named, asking: true };
            todo.push(i);
          } else {
            results[i] = s;
          }
        } else if (mapRefreshed) {
          route[i] = null; // routed by the map the first MOVED of this round refreshed
          todo.push(i);
        } else {
          mapRefreshed = true;
          const s = await this._viaLibrary(args);
          // The refreshed map's node answered ASK (a slot moved again, R8.12) to a node
          // node-redis cannot map: follow it here.
          const lost = this._askedNowhere(s, args);
          if (lost) {
            route[i] = { client: lost, asking: true };
            todo.push(i);
            continue;
          }
          // node-redis re-sent it to the slot's primary in the refreshed map: that node answered.
          const owner = this._clientFor(args);
          if (script && s.status === 'rejected' && isNoScript(s.reason) && !loadedOn.has(owner)) {
            loadOn.add(owner);
            route[i] = { client: owner, asking: false };
            todo.push(i);
          } else {
            results[i] = s;
          }
        }
      }
    }
    return results;
  }

  /**
   * One call through node-redis's cluster #execute (follows MOVED with a slot map refresh). Over
   * TLS the announced host names are read again first (a MOVED or ASK may name a node not seen at
   * connect), from the node that owns the call's slot.
   */
  async _viaLibrary(args) {
    if (this.hosts) {
      try {
        await this._learnHosts(this._clientFor(args));
      } catch (err) {
        return { status: 'rejected', reason: err };
      }
    }
    return this.cluster.sendCommand(routingKey(args), false, args).then(
      (value) => ({ status: 'fulfilled', value }),
      (reason) => ({ status: 'rejected', reason }),
    );
  }

  /**
   * node-redis followed a redirect to a node that answered `ASK` to an address it cannot map (its
   * `Cannot find node host:port`, thrown before anything went there: the call did not run, R8.12):
   * that node's client here, if the session has one.
   *
   * An address with no host (`:port`, R8.13) is never in node-redis's map (keyed by the "ip:port"
   * of CLUSTER NODES), so node-redis always ends so on it. Its host is that of the node that
   * answered the ASK: node-redis throws this in #execute's ASK branch only after
   * `rediscover(client)` of that node, which reads CLUSTER NODES from it first, and a node that
   * answers ASK for a slot owns it in its own view (it is migrating it away); so that node is the
   * slot's primary in the map just read, the one `_clientFor(args)` returns.
   */
  _askedNowhere(s, args) {
    const m = s.status === 'rejected' && /^Cannot find node (\S+)$/.exec(s.reason?.message ?? '');
    if (!m) return null;
    let from;
    try {
      from = hostOf(this._clientFor(args));
    } catch {
      return null; // no slot map (the session was closed meanwhile): the call fails as it is
    }
    return this._clientAt(endpointOf(m[1], from));
  }

  /** The client of the primary at `address` (`host:port` as the cluster announces it), if any. */
  _clientAt(address) {
    for (const node of this.cluster.getMasters()) {
      const socket = node.client?.options?.socket;
      if (socket && `${socket.host}:${socket.port}` === address) return node.client;
    }
    return null;
  }

  async evalScript(name, queue, args) {
    const [s] = await this._dispatch([this._scriptCall(name, queue, args)], this.bundle.scripts[name]);
    if (s.status === 'rejected') throw asEngineError(s.reason);
    return s.value;
  }

  async _evalCalls(name, calls) {
    // Only calls that answered MOVED/ASK/NOSCRIPT (they did not run) go again, see _dispatch.
    const settled = await this._dispatch(calls, this.bundle.scripts[name]);
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed) throw asEngineError(failed.reason);
    return settled.map((s) => s.value);
  }
}


module.exports = { KEY_PREFIX: PREFIX, EngineSession, ClusterEngineSession, SentinelEngineSession, parseHostPort, discoverPrimary, isEchoMqKey, queueKey, jobRoot, loadRedis, FENCE_KEY, slotOf, redirectOf, endpointOf, readCaFile, tlsSocketOptions, clusterNodeHosts, clusterDefaults };
