'use strict';
// Error kinds of wire protocol v1 (SPEC §5). Every failure that reaches the wire is a
// ConnectorError; anything else thrown while serving a request is reported as `internal`.

const KINDS = Object.freeze(['fence', 'invalid', 'engine', 'unsupported', 'internal']);

class ConnectorError extends Error {
  constructor(kind, message) {
    super(message);
    if (!KINDS.includes(kind)) throw new TypeError(`unknown error kind ${kind}`);
    this.kind = kind;
  }
}

const invalid = (message) => new ConnectorError('invalid', message);
const engine = (message) => new ConnectorError('engine', message);
const fence = (message) => new ConnectorError('fence', message);
const unsupported = (message) => new ConnectorError('unsupported', message);

module.exports = { KINDS, ConnectorError, invalid, engine, fence, unsupported };
