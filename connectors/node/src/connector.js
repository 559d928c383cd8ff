'use strict';
// The connector proper: sessions and the verbs of wire protocol v1 (SPEC §5). It knows nothing
// of Redis commands or key names; it validates (validate.js) and then calls the engine seam.

const { ConnectorError, invalid, unsupported } = require('./errors');
const { VERBS, validateVerb } = require('./validate');

const NAME = 'echomq-node';
const VERSION = '0.1.0';

class Connector {
  /**
   * @param bundle the verified bundle (bundle.js)
   * @param opts.open  (url, bundle, log, {cluster, ca, sentinel}) => Promise<engine session>;
   *                   EngineSession.open, ClusterEngineSession.open when cluster is true (SPEC §8),
   *                   or SentinelEngineSession.open with a `sentinel` (SPEC §11), by default; `ca`
   *                   is the PEM certificates of connect's ca_file (R10.1), undefined without one
   * @param opts.log   (line) => void, for stderr
   */
  constructor(bundle, { open, log = () => {} } = {}) {
    this.bundle = bundle;
    this.open = open || ((url, b, l, { cluster, ca, seeds, sentinel } = {}) => {
      const engine = require('./engine');
      if (sentinel) return engine.SentinelEngineSession.open(url, b, l, { ca, sentinel });
      return cluster ? engine.ClusterEngineSession.open(url, b, l, { ca, seeds }) : engine.EngineSession.open(url, b, l, { ca });
    });
    this.log = log;
    this.sessions = new Map(); // name -> {url, cluster, ca, sentinel, engine}
  }

  hello(req) {
    if (req.protocol !== this.bundle.protocol) {
      throw unsupported(`wire protocol ${JSON.stringify(req.protocol)} is not implemented; this connector speaks ${this.bundle.protocol}`);
    }
    const scripts = {};
    for (const [name, s] of Object.entries(this.bundle.scripts)) scripts[name] = s.sha;
    return { name: NAME, version: VERSION, language: 'node', bundle: this.bundle.version, scripts };
  }

  /** Dispatches one parsed request; resolves to the ok value or throws a ConnectorError. */
  async handle(req) {
    const { cmd } = req;
    if (cmd === 'hello') return this.hello(req);
    if (!Object.prototype.hasOwnProperty.call(VERBS, cmd)) throw unsupported(`unknown cmd ${JSON.stringify(cmd)}`);
    const { session, args } = validateVerb(cmd, req);
    if (cmd === 'connect') return this.connect(session, args.url, args.cluster, args.ca, args.sentinel);
    if (cmd === 'disconnect') return this.disconnect(session);
    const entry = this.sessions.get(session);
    if (!entry) throw invalid(`unknown session ${JSON.stringify(session)} (not connected)`);
    if (cmd === 'browse' && args.limit === 0) return []; // limit 0 sends nothing
    const engine = await this.engineOf(session, entry);
    return this[cmd](engine, args);
  }

  async connect(name, url, cluster = false, ca = undefined, sentinel = undefined) {
    const old = this.sessions.get(name);
    this.sessions.delete(name);
    if (old && old.engine) old.engine.close();
    const opts = { cluster, ca };
    if (sentinel) opts.sentinel = sentinel;
    const engine = await this.open(url, this.bundle, (line) => this.log(`[${name}] ${line}`), opts);
    this.sessions.set(name, { url, cluster, ca, sentinel, engine });
    return {};
  }

  disconnect(name) {
    const entry = this.sessions.get(name);
    if (!entry) throw invalid(`unknown session ${JSON.stringify(name)} (not connected)`);
    this.sessions.delete(name);
    if (entry.engine) entry.engine.close();
    return {};
  }

  /**
   * The session's live connection; a lost one is replaced by a fresh connect (fence included). Behind
   * Sentinel that connect asks the Sentinels again (R11.3: never an address remembered); if it
   * fails, this verb fails (kind `engine`) and the next one tries again.
   */
  async engineOf(name, entry) {
    if (entry.engine && entry.engine.alive) return entry.engine;
    // On a cluster every node the last slot map named is a seed too: the url's node may be the
    // one that died (R8.11).
    if (entry.engine?.knownNodes) entry.seeds = entry.engine.knownNodes();
    entry.engine = null;
    this.log(`[${name}] reconnecting`);
    const opts = { cluster: entry.cluster, ca: entry.ca, seeds: entry.seeds };
    if (entry.sentinel) opts.sentinel = entry.sentinel;
    entry.engine = await this.open(entry.url, this.bundle, (line) => this.log(`[${name}] ${line}`), opts);
    return entry.engine;
  }

  async closeAll() {
    for (const entry of this.sessions.values()) if (entry.engine) entry.engine.close();
    this.sessions.clear();
  }

  // ---- verbs: engine calls and reply shaping ----------------------------------------------------

  async enqueue(engine, { queue, payload, delay_ms }) {
    return expectString(await engine.evalScript('enqueue', queue, [payload, delay_ms]), 'enqueue');
  }

  async claim(engine, { queue, lease_ms }) {
    const reply = await engine.evalScript('claim', queue, [lease_ms]);
    if (!Array.isArray(reply)) throw bad('claim', reply);
    if (reply.length === 0) return null;
    const [id, payload, attempts] = reply;
    return { id: expectString(id, 'claim'), payload: payload ?? '', attempts: expectInt(attempts, 'claim') };
  }

  async complete(engine, { queue, id, attempts }) {
    return expectInt(await engine.evalScript('complete', queue, [id, attempts]), 'complete') === 1;
  }

  async retry(engine, { queue, id, attempts, backoff_ms, max_attempts }) {
    return expectString(await engine.evalScript('retry', queue, [id, attempts, backoff_ms, max_attempts]), 'retry');
  }

  async promote(engine, { queue, limit }) {
    return expectInt(await engine.evalScript('promote', queue, [limit]), 'promote');
  }

  async reap(engine, { queue, max_attempts, limit }) {
    return expectInt(await engine.evalScript('reap', queue, [max_attempts, limit]), 'reap');
  }

  async browse(engine, { queue, offset, limit }) {
    return engine.browse(queue, offset, limit);
  }

  async pending_size(engine, { queue }) {
    return expectInt(await engine.pendingSize(queue), 'pending_size');
  }

  async pipeline_probe(engine, { key, n }) {
    return engine.probe(key, n);
  }

  /**
   * n enqueues of `payload`, `depth` EVALSHAs per pipeline; the count done. With `queues`
   * (R4.12), enqueue i goes to queues[i % queues.length]; on a cluster each pipeline is split
   * by node (R8.3).
   */
  async batch(engine, { queue, n, depth, payload, queues }) {
    let done = 0;
    while (done < n) {
      const count = Math.min(depth, n - done);
      const replies = queues
        ? await engine.evalPipelinedOver('enqueue', Array.from({ length: count }, (_, k) => queues[(done + k) % queues.length]), [payload, 0])
        : await engine.evalPipelined('enqueue', queue, [payload, 0], count);
      replies.forEach((r) => expectString(r, 'batch enqueue'));
      done += count;
    }
    return done;
  }
}

function bad(what, reply) {
  return new ConnectorError('internal', `unexpected ${what} reply ${JSON.stringify(reply)}`);
}

function expectString(v, what) {
  if (typeof v !== 'string') throw bad(what, v);
  return v;
}

function expectInt(v, what) {
  if (typeof v !== 'number' || !Number.isInteger(v)) throw bad(what, v);
  return v;
}

module.exports = { Connector, NAME, VERSION };
