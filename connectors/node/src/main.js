'use strict';
// Entry point: `emq-connector-node [--bundle DIR]`. Verifies the bundle, then serves wire
// protocol v1 on stdin/stdout until `stop` or end of input. Logs go to stderr only.

const { BundleError, resolveBundleDir, loadBundle } = require('./bundle');
const { Connector } = require('./connector');
const { runLoop } = require('./protocol');

const USAGE = 'usage: emq-connector-node [--bundle DIR]\n' +
  '  Serves EchoMQ wire protocol v1 (JSON lines) on stdin/stdout.\n' +
  '  Bundle: --bundle DIR, else $EMQ_BUNDLE_DIR, else the repository\'s bundle/.\n';

function log(line) {
  process.stderr.write(`emq-connector-node: ${line}\n`);
}

function parseArgs(argv) {
  const out = { bundle: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') out.help = true;
    else if (a === '--bundle') {
      if (i + 1 >= argv.length) throw new Error('--bundle needs a directory');
      out.bundle = argv[++i];
    } else if (a.startsWith('--bundle=')) out.bundle = a.slice('--bundle='.length);
    else throw new Error(`unknown argument ${JSON.stringify(a)}`);
  }
  return out;
}

async function main(argv = process.argv.slice(2)) {
  let opts;
  try {
    opts = parseArgs(argv);
  } catch (e) {
    process.stderr.write(`emq-connector-node: ${e.message}\n${USAGE}`);
    process.exit(2);
  }
  if (opts.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  let bundle;
  try {
    bundle = loadBundle(resolveBundleDir(opts.bundle));
  } catch (e) {
    if (!(e instanceof BundleError)) throw e;
    log(`bundle verification failed: ${e.message}`);
    process.exit(2);
  }
  const connector = new Connector(bundle, { log });
  await runLoop(process.stdin, process.stdout, (req) => connector.handle(req), log);
  await connector.closeAll();
  process.exit(0);
}

module.exports = { main, parseArgs };
