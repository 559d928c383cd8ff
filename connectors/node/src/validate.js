'use strict';
// Argument validation (SPEC §4 "Validate before sending", §1 queue names, §5 request fields).
// Every check here runs before a byte is sent; a failure is kind `invalid`.

const { invalid } = require('./errors');
const { isEchoMqKey, KEY_PREFIX, readCaFile, parseHostPort } = require('./engine'); // key schema and TLS material live in the seam module

const MAX_MS = 1_000_000_000_000; // delay/lease/backoff cap: keeps now + ms exact in Lua
// Caps SPEC §4 does not state but the gate's cases pin (cases/invalid-int-above-i32-max.yaml,
// cases/invalid-count-above-max.yaml); see README.md, "Where SPEC is silent".
const MAX_I32 = 2_147_483_647; // attempts, max_attempts, offset, limit
const MAX_PROBE_N = 1_000_000; // pipeline_probe n
const MAX_BATCH_N = 10_000_000; // batch n (R4.6)
const MAX_DEPTH = 100_000; // batch depth
const QUEUE_RE = /^[A-Za-z0-9._-]{1,128}$/;
const ID_RE = /^j[0-9]{16}$/;

function field(req, name) {
  if (!Object.prototype.hasOwnProperty.call(req, name) || req[name] === null || req[name] === undefined) {
    throw invalid(`${name} is required`);
  }
  return req[name];
}

function string(req, name) {
  const v = field(req, name);
  if (typeof v !== 'string') throw invalid(`${name} must be a string`);
  return v;
}

function integer(req, name, min, max = Number.MAX_SAFE_INTEGER) {
  const v = field(req, name);
  if (typeof v !== 'number' || !Number.isInteger(v)) throw invalid(`${name} must be an integer`);
  if (v < min) throw invalid(`${name} must be >= ${min}`);
  if (v > max) throw invalid(`${name} must be <= ${max}`);
  return v;
}

const ms = (req, name) => integer(req, name, 0, MAX_MS);

function queue(req) {
  const q = string(req, 'queue');
  if (!QUEUE_RE.test(q)) throw invalid('queue must be 1 to 128 characters of [A-Za-z0-9._-]');
  return q;
}

const MAX_BATCH_QUEUES = 64; // R4.12: batch.queues holds 1 to 64 queue names

/** R4.12: `batch`'s optional `queues`: undefined when absent, else 1..64 queue names, [0] = queue. */
function batchQueues(req, first) {
  if (!Object.prototype.hasOwnProperty.call(req, 'queues')) return undefined;
  const v = req.queues;
  if (!Array.isArray(v)) throw invalid('queues must be a list of queue names');
  if (v.length < 1 || v.length > MAX_BATCH_QUEUES) throw invalid(`queues must hold 1 to ${MAX_BATCH_QUEUES} queue names, not ${v.length}`);
  v.forEach((q, i) => {
    if (typeof q !== 'string' || !QUEUE_RE.test(q)) throw invalid(`queues[${i}] must be 1 to 128 characters of [A-Za-z0-9._-]`);
  });
  if (v[0] !== first) throw invalid('queue must be queues[0] when queues is given');
  return [...v];
}

/** R8.1: `connect`'s optional `cluster`, a JSON boolean when present (absent = false). */
function cluster(req) {
  if (!Object.prototype.hasOwnProperty.call(req, 'cluster')) return false;
  if (typeof req.cluster !== 'boolean') throw invalid('cluster must be a boolean');
  return req.cluster;
}

/**
 * R10.1: `connect`'s optional `ca_file`, the path of a PEM file with the CA certificates to trust
 * (only those). Only with a rediss:// url; the file must be readable and hold a certificate. It is
 * read here, before any connection is opened, so a bad one is kind `invalid` with nothing sent;
 * the session keeps the certificates it read (its reconnects use the same ones).
 */
function caFile(req, u) {
  if (!Object.prototype.hasOwnProperty.call(req, 'ca_file')) return undefined;
  const v = req.ca_file;
  if (typeof v !== 'string' || v.length === 0) throw invalid('ca_file must be a non-empty string (a PEM file path)');
  if (new URL(u).protocol !== 'rediss:') throw invalid('ca_file goes with a rediss:// url only (SPEC R10.1)');
  try {
    return readCaFile(v);
  } catch (err) {
    throw invalid(err.message);
  }
}

/**
 * R11.1: `connect`'s optional `sentinel`: absent or null = none; else an object with `name`, a
 * non-empty string (the name the Sentinels monitor the primary by), and `nodes`, a non-empty list
 * of every Sentinel's `host:port` (port 1..65535), in the order to ask them. Not with a cluster.
 */
function sentinel(req, isCluster) {
  if (!Object.prototype.hasOwnProperty.call(req, 'sentinel') || req.sentinel === null) return undefined;
  const v = req.sentinel;
  if (typeof v !== 'object' || Array.isArray(v)) throw invalid('sentinel must be an object {"name": ..., "nodes": [...]} or null');
  if (isCluster) throw invalid('sentinel and "cluster": true do not go together (SPEC R11.1)');
  if (typeof v.name !== 'string' || v.name.length === 0) throw invalid('sentinel.name must be a non-empty string');
  if (!Array.isArray(v.nodes) || v.nodes.length === 0) throw invalid('sentinel.nodes must be a non-empty list of "host:port"');
  v.nodes.forEach((n, i) => {
    if (!parseHostPort(n)) throw invalid(`sentinel.nodes[${i}] must be "host:port" with a port 1..65535, not ${JSON.stringify(n)}`);
  });
  return { name: v.name, nodes: [...v.nodes] };
}

/**
 * connect: the url and its options. A cluster url may name any database, as any url (R8.5): only
 * the engine knows how many it serves (`cluster-databases`) and which the user may use, so a
 * number it refuses fails at its SELECT (kind `engine`), never here.
 */
function connectArgs(r) {
  const u = url(r);
  const c = cluster(r);
  const s = sentinel(r, c);
  const ca = caFile(r, u);
  const out = { url: u, cluster: c };
  if (ca !== undefined) out.ca = ca;
  if (s !== undefined) out.sentinel = s;
  return out;
}

function batchArgs(r) {
  const q = queue(r);
  const out = { queue: q, n: integer(r, 'n', 1, MAX_BATCH_N), depth: integer(r, 'depth', 1, MAX_DEPTH), payload: string(r, 'payload') };
  const queues = batchQueues(r, q);
  if (queues !== undefined) out.queues = queues;
  return out;
}

function session(req) {
  const s = string(req, 'session');
  if (s.length === 0) throw invalid('session must be a non-empty string');
  return s;
}

function id(req) {
  const v = string(req, 'id');
  if (!ID_RE.test(v)) throw invalid('id must match ^j[0-9]{16}$');
  return v;
}

function url(req) {
  const u = string(req, 'url');
  let parsed;
  try {
    parsed = new URL(u);
  } catch {
    throw invalid('url must be redis://[:password@]host:port[/db] or rediss://...');
  }
  // SPEC §5: one url rule for every connector; rediss:// is the same url over TLS (§10).
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') throw invalid('url scheme must be redis:// or rediss://');
  if (!parsed.hostname) throw invalid('url must name a host');
  const db = parsed.pathname.replace(/^\//, '');
  if (db !== '' && !/^[0-9]+$/.test(db)) throw invalid('url database must be a non-negative integer');
  return u;
}

function probeKey(req) {
  const k = string(req, 'key');
  if (k.length === 0) throw invalid('key must be non-empty');
  if (isEchoMqKey(k)) throw invalid(`key must not be under ${KEY_PREFIX}`);
  return k;
}

// cmd -> validator returning the normalized arguments (without `session`, handled by the caller).
const VERBS = Object.freeze({
  connect: connectArgs,
  disconnect: () => ({}),
  enqueue: (r) => ({ queue: queue(r), payload: string(r, 'payload'), delay_ms: ms(r, 'delay_ms') }),
  browse: (r) => ({ queue: queue(r), offset: integer(r, 'offset', 0, MAX_I32), limit: integer(r, 'limit', 0, MAX_I32) }),
  pending_size: (r) => ({ queue: queue(r) }),
  claim: (r) => ({ queue: queue(r), lease_ms: ms(r, 'lease_ms') }),
  complete: (r) => ({ queue: queue(r), id: id(r), attempts: integer(r, 'attempts', 0, MAX_I32) }),
  retry: (r) => ({
    queue: queue(r),
    id: id(r),
    attempts: integer(r, 'attempts', 0, MAX_I32),
    backoff_ms: ms(r, 'backoff_ms'),
    max_attempts: integer(r, 'max_attempts', 1, MAX_I32),
  }),
  promote: (r) => ({ queue: queue(r), limit: integer(r, 'limit', 0, MAX_I32) }),
  reap: (r) => ({ queue: queue(r), max_attempts: integer(r, 'max_attempts', 1, MAX_I32), limit: integer(r, 'limit', 0, MAX_I32) }),
  pipeline_probe: (r) => ({ key: probeKey(r), n: integer(r, 'n', 1, MAX_PROBE_N) }),
  batch: batchArgs,
});

/** Validates a session verb's request; returns {session, args}. Throws kind `invalid`. */
function validateVerb(cmd, req) {
  const s = session(req);
  return { session: s, args: VERBS[cmd](req) };
}

module.exports = { VERBS, validateVerb, MAX_MS, MAX_I32, MAX_PROBE_N, MAX_BATCH_N, MAX_DEPTH, MAX_BATCH_QUEUES, QUEUE_RE, ID_RE };
