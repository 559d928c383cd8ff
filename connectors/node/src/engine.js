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

const Module = require('node:module');
const path = require('node:path');
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
  return redisModule;
}

// ---- errors ---------------------------------------------------------------------------------------

const isNoScript = (err) => typeof err?.message === 'string' && err.message.startsWith('NOSCRIPT');

/** Any failure of the client (error reply, lost connection, closed client) is kind `engine`. */
function asEngineError(err) {
  if (err instanceof ConnectorError) return err;
  const what = err?.constructor?.name === 'ErrorReply' ? 'engine replied' : 'engine connection failed';
  return engineError(`${what}: ${err?.message ?? String(err)}`);
}

// ---- sessions -------------------------------------------------------------------------------------

class EngineSession {
  /**
   * Opens one connection to `url` and runs the fence check (SPEC §3). Resolves to a ready session,
   * or rejects with kind `fence` (the connection is closed, no script was sent) or `engine`.
   * `log(line)` receives warnings (a different digest).
   */
  static async open(url, bundle, log = () => {}) {
    const { createClient } = loadRedis();
    const session = new EngineSession(bundle, log);
    const client = createClient({
      url,
      disableOfflineQueue: true,
      socket: {
        connectTimeout: 5000,
        reconnectStrategy: () => new Error('reconnects are the connector\'s job'),
      },
    });
    session.client = client;
    client.on('error', (err) => session._onClientError(err));
    try {
      await client.connect();
    } catch (err) {
      session._kill();
      throw asEngineError(err);
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
      const multi = this.client.multi();
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
    const settled = await this._pipeline(Array.from({ length: count }, () => call));
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
      const again = await this._pipeline(missed.map(() => call));
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

module.exports = { KEY_PREFIX: PREFIX, EngineSession, isEchoMqKey, queueKey, jobRoot, loadRedis, FENCE_KEY };
