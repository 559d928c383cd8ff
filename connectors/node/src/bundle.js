'use strict';
// Loads the EchoMQ bundle (SPEC §2) by path and verifies it against its manifest: each script's
// bytes hash to the manifest's sha1, and the digest is sha1 of the six SHAs joined by "\n" in the
// manifest's order. A script is its file's bytes exactly, so sources stay Buffers (never decoded).

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const PROTOCOL = 1; // the wire and bundle major this connector speaks
const SCRIPT_ORDER = Object.freeze(['enqueue', 'claim', 'complete', 'retry', 'promote', 'reap']);
// claim is frozen byte for byte (SPEC §2): a bundle whose claim differs is not bundle v1.
const FROZEN_CLAIM_SHA1 = '2319de1e94e21dd355032c7a25b90636b53f36cd';

class BundleError extends Error {}

const sha1 = (bytes) => crypto.createHash('sha1').update(bytes).digest('hex');

/** Where the bundle lives: --bundle DIR, else $EMQ_BUNDLE_DIR, else the repository's bundle/. */
function resolveBundleDir(cliDir, env = process.env) {
  if (cliDir) return path.resolve(cliDir);
  if (env.EMQ_BUNDLE_DIR) return path.resolve(env.EMQ_BUNDLE_DIR);
  return path.resolve(__dirname, '..', '..', '..', 'bundle');
}

function computeDigest(shas) {
  return sha1(shas.join('\n'));
}

/** Reads and verifies the bundle in `dir`; throws BundleError naming the first mismatch. */
function loadBundle(dir) {
  const manifestPath = path.join(dir, 'manifest.json');
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
  } catch (e) {
    throw new BundleError(`cannot read ${manifestPath}: ${e.message}`);
  }
  if (manifest.protocol !== PROTOCOL) {
    throw new BundleError(`${manifestPath}: protocol ${manifest.protocol}, this connector speaks ${PROTOCOL}`);
  }
  if (typeof manifest.bundle !== 'string' || typeof manifest.digest !== 'string') {
    throw new BundleError(`${manifestPath}: missing bundle version or digest`);
  }
  if (!Array.isArray(manifest.scripts)) {
    throw new BundleError(`${manifestPath}: no scripts list`);
  }
  const names = manifest.scripts.map((s) => s && s.name);
  if (names.join(',') !== SCRIPT_ORDER.join(',')) {
    throw new BundleError(`${manifestPath}: scripts are [${names.join(', ')}], expected [${SCRIPT_ORDER.join(', ')}]`);
  }
  const scripts = {};
  for (const entry of manifest.scripts) {
    const file = path.join(dir, entry.file);
    let source;
    try {
      source = fs.readFileSync(file);
    } catch (e) {
      throw new BundleError(`cannot read script ${entry.name} at ${file}: ${e.message}`);
    }
    const actual = sha1(source);
    if (actual !== entry.sha1) {
      throw new BundleError(`script ${entry.name} (${file}) has sha1 ${actual}, manifest says ${entry.sha1}`);
    }
    if (!Array.isArray(entry.keys) || !Array.isArray(entry.argv) || entry.key_root_argv !== 1) {
      throw new BundleError(`${manifestPath}: script ${entry.name} lacks keys/argv or key_root_argv 1`);
    }
    scripts[entry.name] = Object.freeze({
      name: entry.name,
      sha: actual,
      source,
      keys: Object.freeze([...entry.keys]),
      argv: Object.freeze([...entry.argv]),
    });
  }
  if (scripts.claim.sha !== FROZEN_CLAIM_SHA1) {
    throw new BundleError(`script claim has sha1 ${scripts.claim.sha}; claim is frozen at ${FROZEN_CLAIM_SHA1}`);
  }
  const digest = computeDigest(SCRIPT_ORDER.map((n) => scripts[n].sha));
  if (digest !== manifest.digest) {
    throw new BundleError(`bundle digest is ${digest}, manifest says ${manifest.digest}`);
  }
  return Object.freeze({
    dir,
    protocol: PROTOCOL,
    version: manifest.bundle,
    digest,
    fenceKey: manifest.fence_key,
    scripts: Object.freeze(scripts),
  });
}

module.exports = { PROTOCOL, SCRIPT_ORDER, BundleError, resolveBundleDir, loadBundle, computeDigest, sha1 };
