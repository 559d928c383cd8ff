'use strict';
// Wire protocol v1 framing (SPEC §5): one JSON object per line in, exactly one JSON line out per
// request, in order, echoing `seq`. Requests are served strictly one at a time, so responses can
// never overtake each other. `stop` gets no response. stdout carries nothing but responses.

const readline = require('node:readline');
const { ConnectorError } = require('./errors');

/** Parses one request line. Returns {seq, req}; on a malformed line, {seq, error}. */
function parseRequest(line) {
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    return { seq: null, error: new ConnectorError('invalid', `request is not JSON: ${e.message}`) };
  }
  if (req === null || typeof req !== 'object' || Array.isArray(req)) {
    return { seq: null, error: new ConnectorError('invalid', 'request must be a JSON object') };
  }
  const seq = Object.prototype.hasOwnProperty.call(req, 'seq') ? req.seq : null;
  if (typeof req.cmd !== 'string') {
    return { seq, error: new ConnectorError('invalid', 'request has no string cmd') };
  }
  return { seq, req };
}

/** R5.11: a response line is at most 16 MiB, its newline not counted. */
const MAX_LINE = 16 * 1024 * 1024;

/**
 * The ok line, or, when it would pass R5.11's limit, an `internal` error naming its size (R5.6:
 * the engine did answer, so it is not `engine`; the wire cannot carry it).
 */
function okLine(seq, value, cmd = 'the') {
  const line = JSON.stringify({ seq, ok: value === undefined ? null : value });
  const bytes = Buffer.byteLength(line);
  if (bytes > MAX_LINE) {
    return errorLine(seq, 'internal', `the ${cmd} reply would be a ${bytes}-byte line, over the wire's ${MAX_LINE}-byte limit (R5.11)`);
  }
  return line + '\n';
}

function errorLine(seq, kind, message) {
  return JSON.stringify({ seq, error: { kind, message: String(message) } }) + '\n';
}

/**
 * Serves one line: `handle(req)` resolves to the ok value or throws. Returns the response line,
 * or null for `stop` (the caller then exits). Non-ConnectorError exceptions become `internal`.
 */
async function serveLine(line, handle, log = () => {}) {
  const { seq, req, error } = parseRequest(line);
  if (error) return errorLine(seq, error.kind, error.message);
  if (req.cmd === 'stop') return null;
  try {
    return okLine(seq, await handle(req), req.cmd);
  } catch (err) {
    if (err instanceof ConnectorError) return errorLine(seq, err.kind, err.message);
    log(`internal error serving ${req.cmd}: ${err && err.stack ? err.stack : err}`);
    return errorLine(seq, 'internal', err && err.message ? err.message : String(err));
  }
}

/**
 * Reads requests from `input` and writes responses to `output`, one at a time. Resolves when
 * `stop` arrives or the input ends. Blank lines are ignored.
 */
function runLoop(input, output, handle, log = () => {}) {
  return new Promise((resolve) => {
    const rl = readline.createInterface({ input, crlfDelay: Infinity, terminal: false });
    let chain = Promise.resolve();
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      rl.close();
      resolve();
    };
    rl.on('line', (line) => {
      if (line.trim() === '') return;
      chain = chain.then(async () => {
        if (done) return;
        const out = await serveLine(line, handle, log);
        if (out === null) return finish();
        output.write(out);
      });
    });
    rl.on('close', () => {
      chain = chain.then(finish);
    });
  });
}

module.exports = { parseRequest, okLine, errorLine, serveLine, runLoop, MAX_LINE };
