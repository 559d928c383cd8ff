"""The wire protocol v1 (SPEC §5, frozen): JSON lines on stdin/stdout. No redis here.

One request per line; exactly one response per request, in order, echoing `seq`; stdout is
flushed after every line; stderr is free-form log. `stop` exits 0 with no response, and so does
EOF on stdin.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from typing import Any, Callable

from . import LANGUAGE, NAME, WIRE_PROTOCOL, __version__
from . import seam
from . import validate as v
from .bundle import Bundle, load_bundle, resolve_bundle_dir
from .errors import BundleError, ConnectorError, Invalid, Unsupported
from .seam import ClusterSession, SentinelSession, Session


class _Stop(Exception):
    pass


class Connector:
    def __init__(self, bundle: Bundle):
        self.bundle = bundle
        self.sessions: dict[str, Session] = {}
        self.handlers: dict[str, Callable[[dict], Any]] = {
            "hello": self.hello,
            "connect": self.connect,
            "disconnect": self.disconnect,
            "enqueue": self.enqueue,
            "browse": self.browse,
            "pending_size": self.pending_size,
            "claim": self.claim,
            "complete": self.complete,
            "retry": self.retry,
            "promote": self.promote,
            "reap": self.reap,
            "pipeline_probe": self.pipeline_probe,
            "batch": self.batch,
        }

    # ------------------------------------------------------------------------- dispatch

    def handle_line(self, line: bytes) -> dict | None:
        """One request line -> one response object (None only for `stop`)."""
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            return _error(None, "invalid", "request is not valid UTF-8")
        try:
            req = json.loads(text)
        except ValueError as e:
            return _error(None, "invalid", f"request is not JSON: {e}")
        if not isinstance(req, dict):
            return _error(None, "invalid", "request is not a JSON object")
        seq = req.get("seq")
        if "seq" not in req:
            return _error(None, "invalid", "request has no seq")
        if type(seq) is not int:
            return _error(seq, "invalid", "seq must be an integer")
        cmd = req.get("cmd")
        if not isinstance(cmd, str):
            return _error(seq, "invalid", "cmd must be a string")
        if cmd == "stop":
            raise _Stop()
        handler = self.handlers.get(cmd)
        if handler is None:
            return _error(seq, "unsupported", f"unknown cmd {cmd!r}")
        try:
            return {"seq": seq, "ok": handler(req)}
        except ConnectorError as e:
            return _error(seq, e.kind, e.message)
        except Exception as e:  # never let one request kill the loop
            traceback.print_exc(file=sys.stderr)
            return _error(seq, "internal", f"{type(e).__name__}: {e}")

    def session(self, req: dict) -> Session:
        name = v.session_name(req)
        s = self.sessions.get(name)
        if s is None:
            raise Invalid(f"unknown session {name!r}")
        return s

    def close_all(self) -> None:
        for s in self.sessions.values():
            s.close()
        self.sessions.clear()

    # ------------------------------------------------------------------------- commands

    def hello(self, req: dict) -> dict:
        if "protocol" not in req:
            raise Invalid("missing field protocol")
        protocol = req["protocol"]
        if type(protocol) is not int or protocol != WIRE_PROTOCOL:
            raise Unsupported(f"wire protocol {protocol!r} is not supported; this connector speaks {WIRE_PROTOCOL}")
        return {
            "name": NAME,
            "version": __version__,
            "language": LANGUAGE,
            "bundle": self.bundle.version,
            "scripts": self.bundle.shas(),
        }

    def connect(self, req: dict) -> dict:
        name = v.session_name(req)
        url = v.url(req)
        ca_file = v.ca_file(req, url)
        cluster = v.cluster_flag(req)
        sentinel = v.sentinel(req, cluster)  # R11.1: None on every other deployment
        # A cluster url may name any database (R8.5): the engine, not the client, says which exist.
        # rediss:// (SPEC §10): the TLS context is built here, before anything is dialled and before
        # an old session of that name is closed: an unreadable ca_file, or one with no certificate,
        # is invalid (R10.1).
        tls = seam.tls_for(url, ca_file)
        old = self.sessions.pop(name, None)
        if old is not None:
            old.close()
        if sentinel is not None:
            s = SentinelSession(self.bundle, url, tls, *sentinel)  # asks the Sentinels (§11)
        elif cluster:
            s = ClusterSession(self.bundle, url, tls)
        else:
            s = Session(self.bundle, url, tls)
        s.open()  # reads (and if absent installs) the fence before anything else
        self.sessions[name] = s
        return {}

    def disconnect(self, req: dict) -> dict:
        name = v.session_name(req)
        s = self.sessions.pop(name, None)
        if s is None:
            raise Invalid(f"unknown session {name!r}")
        s.close()
        return {}

    def enqueue(self, req: dict) -> str:
        q, payload, delay = v.queue(req), v.payload(req), v.integer(req, "delay_ms", 0, v.MAX_MS)
        return self.session(req).enqueue(q, payload, delay)

    def browse(self, req: dict) -> list:
        q, offset, limit = v.queue(req), v.integer(req, "offset", 0), v.integer(req, "limit", 0)
        return self.session(req).browse(q, offset, limit)

    def pending_size(self, req: dict) -> int:
        q = v.queue(req)
        return self.session(req).pending_size(q)

    def claim(self, req: dict) -> dict | None:
        q, lease = v.queue(req), v.integer(req, "lease_ms", 0, v.MAX_MS)
        return self.session(req).claim(q, lease)

    def complete(self, req: dict) -> bool:
        q, job, attempts = v.queue(req), v.job_id(req), v.integer(req, "attempts", 0)
        return self.session(req).complete(q, job, attempts)

    def retry(self, req: dict) -> str:
        q, job = v.queue(req), v.job_id(req)
        attempts = v.integer(req, "attempts", 0)
        backoff = v.integer(req, "backoff_ms", 0, v.MAX_MS)
        max_attempts = v.integer(req, "max_attempts", 1)
        return self.session(req).retry(q, job, attempts, backoff, max_attempts)

    def promote(self, req: dict) -> int:
        q, limit = v.queue(req), v.integer(req, "limit", 0)
        return self.session(req).promote(q, limit)

    def reap(self, req: dict) -> int:
        q = v.queue(req)
        max_attempts, limit = v.integer(req, "max_attempts", 1), v.integer(req, "limit", 0)
        return self.session(req).reap(q, max_attempts, limit)

    def pipeline_probe(self, req: dict) -> list:
        key, n = v.probe_key(req), v.integer(req, "n", 1, v.MAX_PROBE)
        return self.session(req).pipeline_probe(key, n)

    def batch(self, req: dict) -> int:
        q, payload = v.queue(req), v.payload(req)
        n, depth = v.integer(req, "n", 1, v.MAX_BATCH), v.integer(req, "depth", 1, v.MAX_DEPTH)
        queues = v.batch_queues(req, q)
        return self.session(req).batch(q, n, depth, payload, queues)


def _error(seq: Any, kind: str, message: str) -> dict:
    return {"seq": seq, "error": {"kind": kind, "message": message}}


MAX_LINE = 16 * 1024 * 1024
"""R5.11: a response line is at most 16 MiB, its newline not counted."""


def encode(response: dict) -> bytes:
    """One response line; one over R5.11's limit becomes kind internal naming its size (R5.6: the
    engine did answer, so it is not engine; the wire cannot carry it)."""
    line = json.dumps(response, separators=(",", ":")).encode("ascii")
    if len(line) > MAX_LINE:
        message = f"the reply would be a {len(line)}-byte line, over the wire's {MAX_LINE}-byte limit (R5.11)"
        line = json.dumps(_error(response.get("seq"), "internal", message), separators=(",", ":")).encode("ascii")
    return line + b"\n"


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="emq-connector-py",
        description="EchoMQ Python connector: wire protocol v1 (JSON lines) on stdin/stdout.",
    )
    p.add_argument("--bundle", metavar="DIR", help="bundle directory (default: $EMQ_BUNDLE_DIR, else the repo's bundle/)")
    p.add_argument("--version", action="version", version=f"{NAME} {__version__}")
    p.add_argument(
        "--retry-on-error",
        action="store_true",
        help="BROKEN ON PURPOSE, for the gate's self-test: keep redis-py's default retry policy, which "
        "re-sends a command after a dropped connection (also $EMQ_PY_RETRY_ON_ERROR=1). G8 fails it.",
    )
    p.add_argument(
        "--silent-reconnect",
        action="store_true",
        help="BROKEN ON PURPOSE, for the gate's self-test: a replacement connection does not read the "
        "fence, as redis-py's pool reconnects by default (also $EMQ_PY_SILENT_RECONNECT=1). G8 fails it.",
    )
    p.add_argument(
        "--cluster-retry",
        action="store_true",
        help="BROKEN ON PURPOSE, for the gate's self-test: on a cluster keep RedisCluster's default retry, "
        "which reads the slot map again and re-sends a node's commands after a dropped connection "
        "(also $EMQ_PY_CLUSTER_RETRY=1). G8 fails it on a cluster.",
    )
    p.add_argument(
        "--silent-node-reconnect",
        action="store_true",
        help="BROKEN ON PURPOSE, for the gate's self-test: on a cluster a node connection that replaces "
        "a dead one does not read the fence, as RedisCluster's per-node pools reconnect by default "
        "(also $EMQ_PY_SILENT_NODE_RECONNECT=1). G8 fails it on a cluster; one engine is untouched.",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.retry_on_error:
        seam.RETRY_ON_ERROR = True
    if args.silent_reconnect:
        seam.SILENT_RECONNECT = True
    if args.cluster_retry:
        seam.CLUSTER_RETRY = True
    if args.silent_node_reconnect:
        seam.SILENT_NODE_RECONNECT = True
    directory = resolve_bundle_dir(args.bundle)
    try:
        bundle = load_bundle(directory)
    except BundleError as e:
        print(f"emq-connector-py: refusing to start: {e}", file=sys.stderr, flush=True)
        return 2
    print(
        f"emq-connector-py: {NAME} {__version__}, bundle {bundle.version} digest {bundle.digest} from {directory}",
        file=sys.stderr,
        flush=True,
    )
    connector = Connector(bundle)
    out = sys.stdout.buffer
    try:
        for raw in sys.stdin.buffer:
            line = raw.rstrip(b"\r\n")
            if not line.strip():
                continue
            try:
                response = connector.handle_line(line)
            except _Stop:
                return 0
            out.write(encode(response))
            out.flush()
        return 0
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        connector.close_all()


if __name__ == "__main__":
    sys.exit(main())
