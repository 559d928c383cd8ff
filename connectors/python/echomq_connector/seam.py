"""THE sole raw-Redis seam of the Python connector.

This module, and only this module, imports redis-py, owns the raw client of every session and
knows the key schema (SPEC §1). Everything else talks to `Session` methods and sees only the
exceptions of `errors` (a test in tests/test_seam.py fails if `redis` is imported elsewhere).

Commands sent, and nothing else (besides what redis-py sends at connect: AUTH as the url's user,
SELECT; on a cluster SELECT <db> (sent by `ClusterSession._on_node_connection`, redis-py's
RedisCluster refuses a database) and CLUSTER SLOTS, never COMMAND: `_cluster_class`; behind
Sentinel, ROLE on every connection to a node a Sentinel named, and to each Sentinel AUTH and
SENTINEL get-master-addr-by-name only: `SentinelSession`; SPEC R4.19's and R11.4's lists):
  - at every new engine connection, before anything else (the fence, SPEC §3):
      HGETALL emq:fence; if empty: MULTI, HSETNX x3, EXEC, HGETALL emq:fence
  - transitions: EVALSHA <sha> ...; on a NOSCRIPT reply one SCRIPT LOAD <source> and the EVALSHA
    again, pipelined in one write
  - browse: ZRANGE pending start stop, then one HGET <root><id> payload per id (one pipeline)
  - pending_size: ZCARD pending
  - pipeline_probe: n INCR <key> in one non-transactional pipeline
  - batch: EVALSHA enqueue, pipelined `depth` per write
"""

from __future__ import annotations

import copy
import functools
import inspect
import os
import socket
import ssl
import sys
import time
import warnings
from typing import Any, Callable
from urllib.parse import unquote, urlsplit, urlunsplit

import redis
import redis.connection
from redis.backoff import NoBackoff, default_backoff
from redis.crc import key_slot
from redis.exceptions import AskError, ClusterDownError, MovedError, NoScriptError, ReadOnlyError, RedisClusterException, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from .bundle import Bundle, Script
from .errors import EngineError, FenceError, Invalid
from .validate import database

# ---------------------------------------------------------------------------------------------
# The key schema (SPEC §1): emq:{q}:<type>; the hash tag {q} keeps a queue in one slot.


def key(q: str, kind: str) -> str:
    return f"emq:{{{q}}}:{kind}"


def job_root(q: str) -> str:
    """ARGV[1] of every script: the job hash root, same hash tag as the KEYS."""
    return f"emq:{{{q}}}:job:"


SOCKET_TIMEOUT_S = 60.0


@functools.cache
def _cluster_class() -> type:
    """redis-py's RedisCluster without its command table. SPEC R4.19 lists the commands a
    connector may send, and COMMAND is not one: RedisCluster reads the engine's whole table
    (`COMMAND`) when it is built, for CommandsParser to find the keys of the commands it routes
    itself (redis/cluster.py:979, redis/_parsers/commands.py:108-109), and an engine's
    least-privilege user refuses it (NOPERM), so no session could open. This connector routes
    every command by its own slot on a node client (`_dispatch`), so the table is never read:
    it stays empty. Imported here, not at the top: a single-engine session never loads it."""
    from redis.cluster import RedisCluster

    class _Cluster(RedisCluster):
        def command(self, **kwargs: Any) -> dict:
            return {}

    return _Cluster

# BROKEN ON PURPOSE when true (`--retry-on-error` or EMQ_PY_RETRY_ON_ERROR=1), for the gate's
# self-test: redis-py's default retry policy is kept, so after a dropped connection it reconnects
# and re-sends the command; a script call whose reply was lost then runs twice, and G8 fails it.
RETRY_ON_ERROR = os.environ.get("EMQ_PY_RETRY_ON_ERROR") == "1"
CONNECT_TIMEOUT_S = 10.0

# BROKEN ON PURPOSE when true (`--silent-reconnect` or EMQ_PY_SILENT_RECONNECT=1), for the gate's
# self-test: only a session's first connection reads the fence; when redis-py's pool replaces a
# connection the engine closed ("Connection has data" / a dead socket in ConnectionPool.
# get_connection, then Connection.connect), the new one sends the verb's EVALSHA straight away,
# as redis-py does by default. R3.1 forbids it; G8 fails it.
SILENT_RECONNECT = os.environ.get("EMQ_PY_SILENT_RECONNECT") == "1"

# BROKEN ON PURPOSE when true (`--cluster-retry` or EMQ_PY_CLUSTER_RETRY=1), for the gate's
# self-test: on a cluster, redis-py's defaults are kept. RedisCluster is built without
# `cluster_error_retry_attempts=0`, and every dispatch runs under its own retry loop as
# RedisCluster._internal_execute_command does: on a ConnectionError or TimeoutError
# (ERRORS_ALLOW_RETRY) the slot map is read again and the whole node pipeline is sent again, up to
# `1 + RedisCluster.retry.get_retries()` times, which is also ClusterPipeline's re-send of every
# command of a node whose read failed. A script call whose reply was lost runs twice (R4.16); G8's
# fault phase on a cluster fails it. One engine is untouched.
CLUSTER_RETRY = os.environ.get("EMQ_PY_CLUSTER_RETRY") == "1"

# BROKEN ON PURPOSE when true (`--silent-node-reconnect` or EMQ_PY_SILENT_NODE_RECONNECT=1), for
# the gate's self-test: on a cluster, a node connection that replaces one of the session's that
# died goes out as redis-py opens it by itself (the node's ConnectionPool.get_connection finds the
# killed socket, "Connection has data" or a read error, and Connection.connect opens another; or
# the next checkout reconnects the connection a failed call dropped), and the session does not read
# the fence again first: `_on_node_connection` lets a node's replacement through, and the refresh
# after a failed call reads the slot map but not the fence. A first connection to a node still reads
# it, and nothing is re-sent (R4.17). The replacement sends the verb's EVALSHA straight away; R3.5
# forbids it; G8's CLIENT KILL phase on a cluster fails it. One engine is untouched.
SILENT_NODE_RECONNECT = os.environ.get("EMQ_PY_SILENT_NODE_RECONNECT") == "1"


def _client_default_retry() -> Retry:
    """The retry policy `redis.Redis(...)` gets by default (from_url alone gets none): re-send a
    command after a ConnectionError or TimeoutError, up to 10 times, with a jittered backoff."""
    default = inspect.signature(redis.Redis.__init__).parameters["retry"].default
    if isinstance(default, Retry):
        return copy.deepcopy(default)
    return Retry(default_backoff(), 3)  # redis-py 5: Redis() had no retry default; its usual one


# ---------------------------------------------------------------------------------------------
# TLS (SPEC §10): a rediss:// session speaks TLS on every connection it opens, from the first byte.


class TLS:
    """The TLS settings of one rediss:// session: `ca_file` (None: the system's trust store) and
    the ssl.SSLContext built from it once, at connect, before anything is dialled.

    The context is ours, not redis-py's: redis-py's SSLConnection._wrap_socket_with_ssl (8.1.0,
    redis/connection.py:2174) starts from `ssl.create_default_context()`, which loads the system's
    trust store (`load_default_certs`) whenever it is called without a CA, and only then adds
    `ssl_ca_certs` (connection.py:2189-2196): the session would trust every system CA as well as
    ca_file, which R10.1 forbids. So `connection_class` below wraps the socket with this context
    instead: PROTOCOL_TLS_CLIENT (CERT_REQUIRED and check_hostname=True, Python's own defaults for
    that protocol), holding ca_file's certificates only (or the system's store when there is no
    ca_file, as production does). Verification is never switched off, and there is no plaintext
    fallback: a handshake that fails is a connection error (kind engine)."""

    def __init__(self, ca_file: str | None):
        self.ca_file = ca_file
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.verify_mode = ssl.CERT_REQUIRED  # the protocol's default, said out loud
        context.check_hostname = True  # the url's host (or the node's host name) must be named
        if ca_file is None:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        else:
            # R10.1: a ca_file that cannot be read or holds no certificate is invalid; nothing is
            # dialled (this runs before any session is made or replaced).
            try:
                context.load_verify_locations(cafile=ca_file)
            except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
                reason = getattr(e, "strerror", None) or getattr(e, "reason", None) or str(e)
                raise Invalid(f"ca_file {ca_file!r} cannot be used: {reason}") from None
            if context.cert_store_stats().get("x509", 0) == 0:
                raise Invalid(f"ca_file {ca_file!r} holds no certificate")
        self.context = context
        # (address, port) -> the host name to verify there, for the names redis-py's cluster client
        # replaces by an address: ClusterNode.__init__ turns the host "localhost" into
        # socket.gethostbyname("localhost") (redis-py 8.1.0 redis/cluster.py:2146-2147, also
        # NodesManager.get_node, cluster.py:2308), so a node the url, the slot map or a redirect
        # names `localhost` is dialled as 127.0.0.1, and its certificate (SAN DNS:localhost, no IP)
        # would be checked against an address it does not name. R10.4 wants the name the slot map
        # gives: `note` records it, `server_name` gives it back at the handshake. A name that is
        # not replaced (any other host) is checked as is; nothing here ever skips the check.
        self._names: dict[tuple[str, int], str] = {}

    def note(self, host: str, port: int) -> None:
        """The url, the slot map or a redirect named `host:port`: verify that name there."""
        if host == "localhost":
            self._names[(socket.gethostbyname(host), int(port))] = host
        else:
            self._names.pop((host, int(port)), None)  # named by its address: checked as the address

    def server_name(self, host: str, port: int) -> str:
        return self._names.get((host, int(port)), host)

    def connection_class(self) -> type:
        """A redis-py connection class bound to this session's context (a class attribute, not a
        constructor keyword: RedisCluster passes node clients only the keywords of its
        REDIS_ALLOWED_KEYS, redis/cluster.py:274, and `connection_class` is one of them)."""
        return type("EmqTLSConnection", (_TLSConnection,), {"emq_tls": self})

    def redis_kwargs(self) -> dict:
        """What a rediss:// client of the session is built with. `connection_class` does the TLS; the
        ssl_* knobs say the same thing to redis-py (and are what its own SSLConnection would use):
        verification required, the host name checked (redis-py 8.1.0 defaults ssl_check_hostname to
        True, connection.py:2081; redis-py 5 defaulted it to False), ca_file as the CA file."""
        return {
            "connection_class": self.connection_class(),
            "ssl_cert_reqs": "required",
            "ssl_check_hostname": True,
            "ssl_ca_certs": self.ca_file,
        }


class _TLSConnection(redis.connection.SSLConnection):
    """redis-py's SSLConnection with the session's own context (see TLS). Every connection the
    session's pool (or a cluster node's pool) opens, a reconnect included, is an instance of this
    class and goes through `_connect`: the TCP socket, then the TLS handshake, before redis-py
    sends a byte (AUTH/SELECT and the fence read come after, in `connect_check_health`)."""

    emq_tls: TLS

    def _connect(self):  # type: ignore[override]
        sock = redis.connection.Connection._connect(self)  # plain TCP: socket, connect, timeouts
        name = self.host
        try:
            sock.settimeout(self.socket_connect_timeout)  # the handshake is part of connecting
            name = self.emq_tls.server_name(self.host, self.port)  # the host itself, but see TLS.note
            tls_sock = self.emq_tls.context.wrap_socket(sock, server_hostname=name)
            tls_sock.settimeout(self.socket_timeout)
            return tls_sock
        except ssl.SSLCertVerificationError as e:
            sock.close()
            trusted = f"the CAs of {self.emq_tls.ca_file}" if self.emq_tls.ca_file else "the system's trust store"
            why = (e.verify_message or str(e)).rstrip(".")
            # Two args: redis-py words it "Error <args[0]> connecting to <host:port>. <args[1]>."
            # (format_error_message, redis/utils.py:307), and the wire carries that as kind engine.
            raise OSError(
                "in the TLS handshake",
                f"The server's certificate was refused: {why} (trusting {trusted} only; host name {name!r})",
            ) from None
        except ssl.SSLError as e:
            sock.close()
            raise OSError("in the TLS handshake", f"TLS failed: {e}") from None
        except TimeoutError:
            # e.g. a plaintext server, which waits for a RESP line the ClientHello never ends:
            # say so, rather than redis-py's bare "Timeout connecting to server"
            sock.close()
            raise OSError(
                "in the TLS handshake",
                f"TLS: no handshake answer within {self.socket_connect_timeout}s (is {self.port} a TLS port?)",
            ) from None
        except BaseException:
            sock.close()
            raise


def tls_for(url: str, ca_file: str | None) -> TLS | None:
    """The TLS settings of a session on `url` (validated): None for redis://."""
    return TLS(ca_file) if url.startswith("rediss://") else None


class _FenceRejected(RedisError):
    """Raised inside redis-py's connect path so redis-py drops the socket; mapped to FenceError."""


class _SelectRefused(RedisError):
    """A cluster node refused the SELECT of the url's database (R8.5), raised inside redis-py's
    connect path so that it drops the socket (Connection.connect disconnects on a RedisError raised
    by redis_connect_func: redis-py 8.2.0 connection.py:1346-1358, 5.0.8 :286-296). Not a
    ResponseError, which NodesManager.initialize would report as "Cluster mode is not enabled on
    this node" (cluster.py:4055-4058), nor a ConnectionError (nothing is wrong with the link).
    Its text is the engine's reply, e.g. `ERR DB index is out of range`; kind engine."""


def _log(msg: str) -> None:
    print(f"emq-connector-py: {msg}", file=sys.stderr, flush=True)


def _is_noscript(err: BaseException) -> bool:
    return isinstance(err, NoScriptError) or str(err).startswith("NOSCRIPT")


_PREFIX_OF = {
    "NoScriptError": "NOSCRIPT",
    "ReadOnlyError": "READONLY",
    "BusyLoadingError": "LOADING",
    "ExecAbortError": "EXECABORT",
    "NoPermissionError": "NOPERM",
    "OutOfMemoryError": "OOM",
}


def _server_message(err: BaseException) -> str:
    """redis-py strips the error code of known replies ("ERR ...", "NOSCRIPT ..."); put it back."""
    msg = str(err)
    if isinstance(err, ResponseError):
        # redis-py >= 8.2 keeps the code it stripped (`status_code`, redis/_parsers/base.py:160-170):
        # exact, where the guess below takes "ERR DB index is out of range" for a code "DB".
        code = getattr(err, "status_code", None)
        if code:
            return msg if msg == code or msg.startswith(code + " ") else f"{code} {msg}"
        prefix = _PREFIX_OF.get(type(err).__name__)
        first = msg.split(" ", 1)[0]
        if prefix and not msg.startswith(prefix):
            return f"{prefix} {msg}"
        if type(err) is ResponseError and not (first.isupper() and first.isalpha()):
            return f"ERR {msg}"
    return msg or type(err).__name__


def _failed(args: tuple, err: BaseException) -> None:
    """Tell the session a call failed with `err` (a Sentinel session may give its primary up)."""
    hook = getattr(args[0], "_on_failure", None) if args else None
    if hook is not None:
        hook(err)


def _engine(fn: Callable) -> Callable:
    """Translate redis-py / socket failures into the wire error kinds."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except _FenceRejected as e:
            raise FenceError(str(e)) from None
        except RedisError as e:
            _failed(args, e)
            raise EngineError(_server_message(e)) from None
        except RedisClusterException as e:  # cluster mode: no reachable node, slots not covered...
            raise EngineError(f"cluster: {e}") from None
        except OSError as e:
            _failed(args, e)
            raise EngineError(f"connection error: {e}") from None

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def _first_connection(client: redis.Redis) -> None:
    """Open the client's (only) connection now, so that connect answers for it: the connect
    function runs (AUTH, the fence, ...). On any failure the client is closed."""
    pool = client.connection_pool
    try:
        try:
            conn = pool.get_connection()
        except TypeError:  # redis-py 5 wants a command name
            conn = pool.get_connection("_")
        pool.release(conn)
    except BaseException:
        _close_client(client)
        raise


def _close_client(client: redis.Redis | None) -> None:
    """Close every socket of a client's pool, then the client (R5.13)."""
    if client is None:
        return
    try:
        client.connection_pool.disconnect()
    except Exception:  # closing a dead socket is not an error worth reporting
        pass
    try:
        client.close()
    except Exception:
        pass


def _s(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


class Session:
    """One engine connection (one redis-py client whose pool holds at most one connection)."""

    def __init__(self, bundle: Bundle, url: str, tls: TLS | None = None):
        self.bundle = bundle
        self.url = url
        self.tls = tls  # rediss://: every connection of the session speaks TLS (SPEC §10)
        self._client: redis.Redis | None = None

    # ----------------------------------------------------------------------------- connect

    def _on_new_connection(self, conn: Any) -> None:
        """redis-py calls this for every connection it opens, the session's first and every
        replacement: each reads the fence first (R3.1), unless broken on purpose."""
        if SILENT_RECONNECT and getattr(self, "_fenced_once", False):
            conn.on_connect()
            return
        self._fence(conn)
        self._fenced_once = True

    def _fence(self, conn: Any) -> None:
        """redis_connect_func: runs on EVERY new socket, before any command of ours."""
        conn.on_connect()  # AUTH / SELECT as redis-py does them (CLIENT SETINFO disabled)
        self._read_fence(conn)

    def _read_fence(self, conn: Any) -> None:
        """R3.1/R3.2 on a connection that is authenticated and in the session's database."""
        fence = self.bundle.fence_key
        current = self._hgetall(conn, fence)
        if not current:
            conn.send_packed_command(
                conn.pack_commands(
                    [
                        ("MULTI",),
                        ("HSETNX", fence, "protocol", str(self.bundle.protocol)),
                        ("HSETNX", fence, "bundle", self.bundle.version),
                        ("HSETNX", fence, "digest", self.bundle.digest),
                        ("EXEC",),
                    ]
                )
            )
            replies = [conn.read_response() for _ in range(5)]
            for r in replies[-1] or []:
                if isinstance(r, Exception):
                    raise r
            current = self._hgetall(conn, fence)
        self._judge_fence(current)

    def _judge_fence(self, current: dict[str, str]) -> None:
        """R3.3/R3.4 on the fence as read: another protocol is refused; another digest is a warning."""
        protocol = current.get("protocol")
        mine = str(self.bundle.protocol)
        if protocol != mine:
            shown = protocol if protocol is not None else "<missing>"
            raise _FenceRejected(
                f"fence protocol {shown} does not match connector protocol {mine} "
                f"(fence bundle {current.get('bundle', '<missing>')}, connector bundle {self.bundle.version})"
            )
        digest = current.get("digest")
        if digest != self.bundle.digest:
            _log(
                f"warning: fence digest {digest} differs from bundle digest {self.bundle.digest} "
                f"(fence bundle {current.get('bundle')}, ours {self.bundle.version}); connecting anyway"
            )

    @staticmethod
    def _hgetall(conn: Any, fence: str) -> dict[str, str]:
        conn.send_command("HGETALL", fence)
        flat = conn.read_response() or []
        if isinstance(flat, dict):  # RESP3 map, should we ever be on RESP3
            return {_s(k): _s(v) for k, v in flat.items()}
        return {_s(flat[i]): _s(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}

    @_engine
    def open(self) -> None:
        client = self._new_client(self.url, self._on_new_connection)
        _first_connection(client)
        self._client = client

    def _new_client(self, url: str, connect_func: Callable, connect_timeout: float = CONNECT_TIMEOUT_S) -> redis.Redis:
        """The session's redis-py client on `url` (nothing dialled yet): one connection at most,
        RESP2, no retries, no CLIENT SETINFO, `connect_func` run on every connection it opens."""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # lib_name/lib_version deprecation in redis-py 8
                return redis.Redis.from_url(
                    url,
                    protocol=2,
                    decode_responses=False,
                    # Never resend a script call behind our back (SPEC §4), unless broken on purpose.
                    retry=_client_default_retry() if RETRY_ON_ERROR else Retry(NoBackoff(), 0),
                    retry_on_timeout=False,
                    health_check_interval=0,
                    max_connections=1,
                    lib_name=None,
                    lib_version=None,  # no CLIENT SETINFO
                    socket_timeout=SOCKET_TIMEOUT_S,
                    socket_connect_timeout=connect_timeout,
                    redis_connect_func=connect_func,
                    # rediss:// (SPEC §10): ConnectionPool.from_url keeps a given connection_class
                    # over the url's SSLConnection (redis/connection.py:2961-2962) and builds every
                    # connection of the pool, replacements included, from it.
                    **(self.tls.redis_kwargs() if self.tls else {}),
                )
        except (ValueError, TypeError) as e:
            raise Invalid(f"url: {e}") from None

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # closing a dead socket is not an error worth reporting
                pass

    @property
    def r(self) -> redis.Redis:
        if self._client is None:
            raise EngineError("session is closed")
        return self._client

    # ----------------------------------------------------------------------------- scripts

    def _evalsha(self, name: str, keys: list[str], argv: list[Any]) -> Any:
        script = self.bundle.scripts[name]
        args = ("EVALSHA", script.sha1, len(keys), *keys, *argv)
        try:
            return self.r.execute_command(*args)
        except ResponseError as e:
            if not _is_noscript(e):
                raise
        # NOSCRIPT: exactly one SCRIPT LOAD, then the EVALSHA again, both in one write so that
        # another client's SCRIPT FLUSH cannot fall between them.
        (reply,) = self._send_chunk([args], load_first=script)
        if isinstance(reply, Exception):
            raise reply
        return reply

    # ----------------------------------------------------------------------------- verbs

    @_engine
    def enqueue(self, q: str, payload: str, delay_ms: int) -> str:
        reply = self._evalsha(
            "enqueue",
            [key(q, "pending"), key(q, "delayed"), key(q, "seq")],
            [job_root(q), payload, delay_ms],
        )
        return _s(reply)

    @_engine
    def browse(self, q: str, offset: int, limit: int) -> list[dict]:
        if limit == 0:
            return []
        stop = min(offset + limit - 1, 2**63 - 1)
        ids = [_s(i) for i in self.r.execute_command("ZRANGE", key(q, "pending"), offset, stop)]
        if not ids:
            return []
        pipe = self.r.pipeline(transaction=False)
        root = job_root(q)
        for i in ids:
            pipe.execute_command("HGET", root + i, "payload")
        payloads = pipe.execute(raise_on_error=True)
        return [{"id": i, "payload": None if p is None else _s(p)} for i, p in zip(ids, payloads)]

    @_engine
    def pending_size(self, q: str) -> int:
        return int(self.r.execute_command("ZCARD", key(q, "pending")))

    @_engine
    def claim(self, q: str, lease_ms: int) -> dict | None:
        reply = self._evalsha("claim", [key(q, "pending"), key(q, "active")], [job_root(q), lease_ms])
        if not reply:
            return None
        job_id, payload, attempts = reply
        return {
            "id": _s(job_id),
            "payload": None if payload is None else _s(payload),
            "attempts": int(attempts),
        }

    @_engine
    def complete(self, q: str, job_id: str, attempts: int) -> bool:
        reply = self._evalsha("complete", [key(q, "active")], [job_root(q), job_id, attempts])
        return int(reply) == 1

    @_engine
    def retry(self, q: str, job_id: str, attempts: int, backoff_ms: int, max_attempts: int) -> str:
        reply = self._evalsha(
            "retry",
            [key(q, "active"), key(q, "delayed"), key(q, "dead")],
            [job_root(q), job_id, attempts, backoff_ms, max_attempts],
        )
        return _s(reply)

    @_engine
    def promote(self, q: str, limit: int) -> int:
        return int(self._evalsha("promote", [key(q, "delayed"), key(q, "pending")], [job_root(q), limit]))

    @_engine
    def reap(self, q: str, max_attempts: int, limit: int) -> int:
        return int(
            self._evalsha(
                "reap",
                [key(q, "active"), key(q, "pending"), key(q, "dead")],
                [job_root(q), max_attempts, limit],
            )
        )

    @_engine
    def pipeline_probe(self, probe_key: str, n: int) -> list[int]:
        pipe = self.r.pipeline(transaction=False)
        for _ in range(n):
            pipe.execute_command("INCR", probe_key)
        replies = pipe.execute(raise_on_error=False)
        for r in replies:
            if isinstance(r, Exception):
                raise r
        return [int(r) for r in replies]

    @_engine
    def batch(self, q: str, n: int, depth: int, payload: str, queues: list[str] | None = None) -> int:
        """n enqueues of payload (delay 0), `depth` EVALSHA per pipeline write; enqueue i goes to
        queues[i % len(queues)] (R4.12), or to q when queues is None. One node: a pipeline may mix
        queues."""
        script = self.bundle.scripts["enqueue"]
        names = queues or [q]
        commands = [
            ("EVALSHA", script.sha1, 3, key(x, "pending"), key(x, "delayed"), key(x, "seq"), job_root(x), payload, 0)
            for x in names
        ]
        # The first enqueue goes through the normal path: it loads the script if it is missing.
        self._evalsha("enqueue", list(commands[0][3:6]), [job_root(names[0]), payload, 0])
        done = 1
        while done < n:
            todo = [commands[i % len(commands)] for i in range(done, min(done + depth, n))]
            load = False
            stalled = 0
            while todo:
                missed = []
                for command, r in zip(todo, self._send_chunk(todo, load_first=script if load else None)):
                    if isinstance(r, Exception):
                        if not _is_noscript(r):
                            raise r
                        missed.append(command)
                done += len(todo) - len(missed)
                # A miss means the script vanished mid-batch (SCRIPT FLUSH): resend only the misses
                # (the others ran; resending them would enqueue twice) behind one SCRIPT LOAD in the
                # same write, so no other client's flush can fall between the load and the resend.
                # Give up only when a freshly loaded script misses on every command, again and again.
                stalled = stalled + 1 if (load and len(missed) == len(todo)) else 0
                if stalled >= 10:
                    raise EngineError("NOSCRIPT No matching script. (enqueue still missing after 10 loads)")
                load = bool(missed)
                todo = missed
        return done

    def _send_chunk(self, commands: list[tuple], load_first: Script | None = None) -> list:
        pipe = self.r.pipeline(transaction=False)
        if load_first is not None:
            pipe.execute_command("SCRIPT", "LOAD", load_first.source)
        for command in commands:
            pipe.execute_command(*command)
        replies = pipe.execute(raise_on_error=False)
        if load_first is not None:
            sha = replies.pop(0)
            if isinstance(sha, Exception):
                raise sha
            if _s(sha).lower() != load_first.sha1:
                raise EngineError(f"SCRIPT LOAD of {load_first.name} returned {_s(sha)}, bundle says {load_first.sha1}")
        return replies


# ---------------------------------------------------------------------------------------------
# Cluster mode (SPEC §8): `connect` with "cluster": true. The url names one node (the seed).


REDIRECT_LIMIT = 16  # rounds of MOVED/ASK followed for one command before giving up (kind engine)


class ClusterSession(Session):
    """One session on a Valkey Cluster (SPEC §8): redis-py's RedisCluster learns the slot map from
    the seed and holds one client (one connection pool) per node, with the url's password on every
    node. Every command that names an EchoMQ key is sent by `_dispatch` below, never by
    RedisCluster.execute_command or ClusterPipeline:

      - routing (R8.1): to `slots_cache[slot][0]`, the slot's primary; never a replica;
      - one pipeline per node (R8.3): a node's share of a call goes, in order, as one pipeline
        on that node's own connection; no pipeline ever carries another node's slot;
      - redirects (R8.1): a MOVED or ASK reply says the command did not run, so that command (and
        only it) is sent again to the node named (behind ASKING for ASK), and MOVED updates the
        slot map; TRYAGAIN and CLUSTERDOWN are replies like any other: kind engine;
      - an unknown endpoint (R8.13): a redirect that names no host (`MOVED 12 :7001`, from a
        cluster at `cluster-preferred-endpoint-type unknown-endpoint`) names the host of the node
        that answered it (`_unnamed`), for the re-send and for the slot map; a CLUSTER SLOTS
        reply's null or empty host is redis-py's to fill, with the host of the node it asked
        (NodesManager.initialize, redis-py 8.2.0 redis/cluster.py:4097-4103, replicas :4116-4118);
      - scripts (R8.2): a NOSCRIPT from a node is answered by SCRIPT LOAD on that node only, in
        the same write as the EVALSHA sent again there;
      - failures (R4.16): a connection error or timeout is raised at once, nothing is re-sent,
        and the connection is dropped (redis-py disconnects on any read error).

    Why not redis-py's own cluster dispatch (checked in redis-py 8.1.0, redis/cluster.py):
      - ClusterPipeline re-sends every command whose reply was a ConnectionError or TimeoutError
        one at a time through execute_command ("RETRY MAGIC HAPPENS HERE",
        PipelineStrategy._send_cluster_commands: `attempt = ... isinstance(c.result,
        ClusterPipeline.ERRORS_ALLOW_RETRY)` with ERRORS_ALLOW_RETRY = (ConnectionError,
        TimeoutError, MovedError, AskError, TryAgainError), then
        `c.result = self._pipe.parent_execute_command(*c.args, ...)`), whatever the retry knobs
        say: a batch whose reply was lost would be enqueued twice (R4.16);
      - RedisCluster._execute_command loops on TRYAGAIN (up to RedisClusterRequestTTL = 16 tries)
        and cannot tell us which node answered NOSCRIPT after an ASK.

    The knobs are set anyway, so that nothing the library does on its own re-sends a command:
      - cluster_error_retry_attempts=0: RedisCluster.__init__ builds `self.retry = Retry(...,
        retries=cluster_error_retry_attempts)` when no `retry` is given, and
        _internal_execute_command makes `1 + self.retry.get_retries()` attempts on
        ERRORS_ALLOW_RETRY = (ConnectionError, TimeoutError, ClusterDownError,
        SlotNotCoveredError); 0 means one attempt. (In redis-py 5 it is read directly as the
        attempt count.) It is deprecated since 6.0 in favour of `retry`, but `retry` is NOT
        passed: redis-py 5 copies a given `retry` onto every node connection
        (`kwargs.update({"retry": self.retry})`), while without it the node clients get no
        retries in both lines (5: `Retry(default_backoff(), 0)`; 8.1: NodesManager.
        create_redis_node's `Retry(backoff=NoBackoff(), retries=0, supported_errors=
        (ConnectionError,))`). The node pipelines used here run under that node retry, so a
        ConnectionError or TimeoutError is raised after one try (Retry.call_with_retry raises
        once failures > retries) and never re-sent;
      - read_from_replicas=False and no load_balancing_strategy: RedisCluster.on_connect sends no
        READONLY and get_node_from_slot returns the primary (`node_idx = 0`);
      - `redis_connect_func` (RedisCluster.on_connect runs it after AUTH on every connection it
        opens): the fence is read at connect, on the fence's node (below), again before the next
        call after any connection failure of the session, and again before any connection opened
        once the session is open says a word (`_on_node_connection`): redis-py's pool replaces a
        connection the engine closed at checkout ("Connection has data"), silently, so without
        this a killed connection's replacement would send a script before any fence read (R3.1).

    The url's database (R8.5), on every node: RedisCluster refuses one itself ("A ``db``
    querystring option can only be 0 in cluster mode" for a url, "Argument 'db' is not possible to
    use in cluster mode" for a keyword: redis-py 8.2.0 redis/cluster.py:1396-1399 and :1349-1352;
    5.0.8 :585-588, :569), so the seed url goes in without its `/db` (`_seed_url`) and every node
    connection has redis-py's db 0 (no SELECT from Connection.on_connect, connection.py:1582-1583).
    The SELECT is ours instead, the first thing `_on_node_connection` sends, right after redis-py's
    AUTH: RedisCluster.__init__ puts its own `on_connect` in `redis_connect_func` and keeps ours as
    `user_on_connect_func` (cluster.py:1423-1424), which it calls after `connection.on_connect()`
    (:1583-1600); `redis_connect_func` is one of REDIS_ALLOWED_KEYS (:643), so cleanup_kwargs
    (:683-692) gives it to NodesManager.connection_kwargs, which builds every node's pool
    (create_redis_node, :3592-3631): the seed's (NodesManager.initialize, :4032-4037), every node
    of the slot map (_create_redis_connections, :3522-3533), a redirect's target outside the map
    (`_node_at` -> get_redis_connection -> create_redis_connections, :1603-1608, :3512-3520). Each
    pool makes every connection from those kwargs (ConnectionPool.make_connection,
    connection.py:4412-4425), and a connection's only way to a socket is connect_check_health,
    which runs redis_connect_func right after setting it (connection.py:1345-1352), for the first
    connection and for every replacement (ensure_connection's "Connection has data" reconnect,
    :4377-4395; a dropped connection's next command, send_packed_command's `if not self._sock`,
    :1682-1683). So no connection of the session sends CLUSTER SLOTS, the fence or a script before
    its SELECT (tests/test_cluster_db.py watches the seed, a MOVED and an ASK target, and a
    replacement). A SELECT the engine refuses (out of range, not allowed in cluster mode, NOPERM)
    fails `connect` with kind engine and the engine's text (`_SelectRefused`); nothing else goes
    out on it.
    """

    def __init__(self, bundle: Bundle, url: str, tls: TLS | None = None):
        super().__init__(bundle, url, tls)
        self.db = database(url)  # R8.5: SELECTed on every node connection (none for 0)
        self._select_refused: str | None = None  # the engine's refusal of that SELECT, for connect
        self._cluster: Any = None
        self._stale = False  # a connection of this session failed: refresh the map, re-read the fence
        self._extra_nodes: list[Any] = []  # ASK targets outside the slot map (closed with the session)
        self._open_done = False  # the connect's own fence read is done
        self._fencing = False  # a fence read (or the slot map read before one) is under way
        self._nodes_opened: set[tuple[str, int]] = set()  # (host, port) the session opened a connection to

    def _remap(self, address: tuple[str, int]) -> tuple[str, int]:
        """address_remap: changes nothing; notes the host name the slot map gives (TLS.note)."""
        if self.tls is not None:
            self.tls.note(*address)
        return address

    def _on_node_connection(self, conn: Any) -> None:
        """redis-py calls this for every connection the session opens, on any node, before it sends
        anything of ours. One opened once the session is open (a replacement for a connection the
        engine closed, or a first one to another node) waits for a fence read on the fence's node
        (R3.1, R8.1). The read's own connection, and those the connect or a refresh opens (they
        read the fence themselves), go through; so does a replacement on a node the session had
        a connection to, when broken on purpose (SILENT_NODE_RECONNECT). Every one of them, first
        of all, SELECTs the url's database (R8.5, `_select`)."""
        self._select(conn)
        node = (getattr(conn, "host", None), getattr(conn, "port", None))
        replacement = node in self._nodes_opened
        self._nodes_opened.add(node)
        if not self._open_done or self._fencing:
            return
        if SILENT_NODE_RECONNECT and replacement:
            return  # BROKEN ON PURPOSE: redis-py's silent replacement, no fence read (see the flag)
        self._fencing = True
        try:
            self._fence_cluster()
        finally:
            self._fencing = False

    def _select(self, conn: Any) -> None:
        """SELECT the url's database on a node connection redis-py just opened and authenticated
        (R8.5), and check the reply: an error reply (`ERR DB index is out of range`, `ERR SELECT is
        not allowed in cluster mode`, `NOPERM ...`) is raised as `_SelectRefused` with the engine's
        text, so redis-py drops the connection before anything else is sent on it. Database 0
        needs no SELECT (a new connection is in it)."""
        if not self.db:
            return
        conn.send_command("SELECT", self.db)
        try:
            reply = _s(conn.read_response())
        except ResponseError as e:
            reply = _server_message(e)  # the engine's words, its error code restored
            if type(e) is ResponseError and getattr(e, "status_code", None) is None and not reply.startswith("ERR "):
                # redis-py < 8.2 keeps no code, and _server_message's guess takes "DB" of "ERR DB
                # index is out of range" for one: a plain ResponseError to SELECT is an ERR (NOPERM
                # is a NoPermissionError, whose code _server_message restores).
                reply = f"ERR {e}"
        if reply != "OK":
            self._select_refused = f"{reply} (SELECT {self.db} on {conn.host}:{conn.port}, the url's database)"
            raise _SelectRefused(self._select_refused)

    def _seed_url(self) -> str:
        """The url RedisCluster is given: the session's without its `/db` (RedisCluster refuses a
        database other than 0; `_select` sends it), and as redis:// over TLS (see `open`)."""
        parts = urlsplit(self.url)
        scheme = "redis" if self.tls is not None else parts.scheme
        return urlunsplit((scheme, parts.netloc, "", parts.query, parts.fragment))

    # ----------------------------------------------------------------------------- connect

    @_engine
    def open(self) -> None:
        RedisCluster = _cluster_class()

        # The default retry is kept only in the broken-on-purpose double (CLUSTER_RETRY).
        knobs = {} if CLUSTER_RETRY else {"cluster_error_retry_attempts": 0}  # see the class docstring
        url = self._seed_url()  # no /db: the SELECT is `_select`'s (R8.5, the class docstring)
        if self.tls is not None:
            # rediss:// (SPEC §10, R10.2): RedisCluster.__init__ does `kwargs.update(parse_url(url))`
            # (redis/cluster.py:833, :844), and parse_url says connection_class=SSLConnection for
            # rediss:// (connection.py:2384-2385), which would replace ours. So the seed url goes in
            # as redis:// (`_seed_url`) and TLS comes from `connection_class` alone: NodesManager
            # hands it to every node's pool (cleanup_kwargs keeps it, cluster.py:274;
            # create_redis_node, cluster.py:2518-2523), the seed, the nodes of the slot map,
            # redirect targets and every replacement connection.
            knobs.update(self.tls.redis_kwargs())
            # R10.4: the names the url and the slot map give are the names checked (TLS.note):
            # address_remap sees every host of CLUSTER SLOTS before ClusterNode turns `localhost`
            # into an address (NodesManager.initialize, cluster.py:2729 and 2742).
            seed = urlsplit(url)
            self.tls.note(seed.hostname or "", seed.port or 6379)
            knobs["address_remap"] = self._remap
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # cluster_error_retry_attempts, lib_name: deprecated
                client = RedisCluster.from_url(
                    url,
                    protocol=2,
                    decode_responses=False,
                    **knobs,
                    read_from_replicas=False,
                    retry_on_timeout=False,
                    lib_name=None,
                    lib_version=None,  # no CLIENT SETINFO
                    socket_timeout=SOCKET_TIMEOUT_S,
                    socket_connect_timeout=CONNECT_TIMEOUT_S,
                    redis_connect_func=self._on_node_connection,
                )
        except (ValueError, TypeError) as e:
            raise Invalid(f"url: {e}") from None
        except RedisClusterException:
            # NodesManager.initialize keeps the seed's error and raises its own ("Redis Cluster
            # cannot be connected. Please provide at least one reachable node: ...", cluster.py:
            # 4156-4178): a refused SELECT is said as the engine said it (R8.5), kind engine.
            if self._select_refused is not None:
                raise EngineError(self._select_refused) from None
            raise
        self._cluster = client
        try:
            self._fence_cluster()
            self._open_done = True
        except BaseException:
            self._cluster = None
            client.close()
            raise

    def close(self) -> None:
        """Drops every connection of the session, on every node it knows. RedisCluster.close()
        alone is not enough: it calls Redis.close() on each node's client, which leaves the
        pool's sockets open when the pool was passed in (`auto_close_connection_pool` is False
        for the node clients RedisCluster.from_url builds), so each pool is disconnected first."""
        client, self._cluster = self._cluster, None
        if client is None:
            return
        nm = client.nodes_manager
        nodes = [*nm.nodes_cache.values(), *nm.startup_nodes.values(), *self._extra_nodes]
        self._extra_nodes = []
        for node in nodes:
            r = node.redis_connection
            if r is not None:
                try:
                    r.connection_pool.disconnect()
                except Exception:  # closing a dead socket is not an error worth reporting
                    pass
        try:
            client.close()
        except Exception:
            pass

    def _fence_cluster(self) -> None:
        """§3 on the node that owns emq:fence's slot: HGETALL; if there is no protocol, MULTI /
        HSETNX x3 / EXEC on that node's connection, and HGETALL again."""
        fence = self.bundle.fence_key
        slot = key_slot(fence.encode())
        current = self._fence_read(slot, fence)
        if "protocol" not in current:
            for _ in range(REDIRECT_LIMIT):
                node = self._primary(slot)
                pipe = self._node_client(node).pipeline(transaction=True)
                pipe.execute_command("HSETNX", fence, "protocol", str(self.bundle.protocol))
                pipe.execute_command("HSETNX", fence, "bundle", self.bundle.version)
                pipe.execute_command("HSETNX", fence, "digest", self.bundle.digest)
                try:
                    self._execute(pipe)
                    break
                except AskError as e:  # MOVED (a failover) before EXEC: nothing ran; ask the new owner
                    self._moved(self._unnamed(e, node))
            else:
                raise EngineError("the fence's slot kept moving")
            current = self._fence_read(slot, fence)
        self._judge_fence(current)

    def _fence_read(self, slot: int, fence: str) -> dict[str, str]:
        (reply,) = self._dispatch([(slot, ("HGETALL", fence))])
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, dict):  # redis-py's HGETALL callback
            return {_s(k): _s(v) for k, v in reply.items()}
        flat = reply or []
        return {_s(flat[i]): _s(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}

    @property
    def client(self) -> Any:
        if self._cluster is None:
            raise EngineError("session is closed")
        if self._stale:
            # A connection failed on the last call: learn the slot map afresh (a failover may be
            # under way) and read the fence again before any script, as a reconnect does (§7).
            self._stale = False
            fencing, self._fencing = self._fencing, True  # this refresh reads the fence itself
            try:
                self._cluster.nodes_manager.initialize()
                if not SILENT_NODE_RECONNECT:  # BROKEN ON PURPOSE otherwise: no fence read, see the flag
                    self._fence_cluster()
            except BaseException:
                self._stale = True
                raise
            finally:
                self._fencing = fencing
        return self._cluster

    # ----------------------------------------------------------------------------- routing

    def _primary(self, slot: int) -> Any:
        nodes = self.client.nodes_manager.slots_cache.get(slot)
        if not nodes:
            raise EngineError(f"slot {slot} is not covered by the cluster")
        return nodes[0]  # the primary; replicas follow it in the list and are never used

    def _node_client(self, node: Any) -> redis.Redis:
        return self.client.get_redis_connection(node)

    def _node_at(self, host: str, port: int) -> Any:
        from redis.cluster import ClusterNode

        if self.tls is not None:
            self.tls.note(host, port)  # the name the redirect gives is the name checked (R10.4)
        node = self.client.nodes_manager.get_node(host=host, port=port)
        if node is None:
            node = next((n for n in self._extra_nodes if n.host == host and n.port == port), None)
        if node is None:
            node = ClusterNode(host, port)
            self._extra_nodes.append(node)
        return node

    def _unnamed(self, e: AskError, node: Any) -> AskError:
        """R8.13: a redirect with an empty host (`MOVED 12 :7001`, `ASK 12 :7001`: the engine's nodes
        have no endpoint to give, `cluster-preferred-endpoint-type unknown-endpoint`) names the host
        of the node that sent it, `node`, the one the command went to, at the port given. redis-py
        parses the host as "" (AskError.__init__'s `new_node.rsplit(":", 1)`, redis-py 8.2.0
        redis/exceptions.py:221; MovedError is an AskError, :251) and would dial "" (getaddrinfo
        refuses it) and put a ClusterNode("", port) in the slot map (NodesManager.move_slot,
        redis/cluster.py:3343-3368). So the host is filled in here, before `_moved` or `_node_at`
        see it. Over TLS it is the name that node is checked as (R10.4: `localhost`, not the
        address ClusterNode makes of it). A `?` host (`hostname` endpoints with none announced:
        a misconfigured cluster, not judged) is left as it is."""
        if not e.host:
            host = self.tls.server_name(node.host, node.port) if self.tls is not None else node.host
            e.host = host
            e.node_addr = (host, e.port)
        return e

    def _moved(self, e: AskError) -> None:
        """MOVED: the slot has a new owner; patch the slot map (redis-py >= 6), else refresh it."""
        nm = self.client.nodes_manager
        if self.tls is not None:
            self.tls.note(e.host, e.port)  # the name the redirect gives is the name checked (R10.4)
        if isinstance(e, MovedError) and hasattr(nm, "move_slot"):
            nm.move_slot(e)
        else:
            nm.initialize()

    def _execute(self, pipe: Any) -> list:
        try:
            return pipe.execute(raise_on_error=False) if not pipe.transaction else pipe.execute()
        except (RedisConnectionError, RedisTimeoutError, OSError):
            self._stale = True
            raise

    def _dispatch(self, items: list[tuple[int, tuple]], load: Script | None = None) -> list:
        if not CLUSTER_RETRY:
            return self._dispatch_once(items, load)
        # BROKEN ON PURPOSE (CLUSTER_RETRY): RedisCluster's default retry loop, see the flag.
        retries = self.client.retry.get_retries()
        while True:
            try:
                return self._dispatch_once(items, load)
            except (RedisConnectionError, RedisTimeoutError):
                if retries <= 0:
                    raise
                retries -= 1  # _stale is set: the next self.client reads the slot map again

    def _dispatch_once(self, items: list[tuple[int, tuple]], load: Script | None = None) -> list:
        """Send each (slot, command) to its slot's primary: one pipeline per node, in order (a
        node's share of `items` in their order, so in order within each queue); with `load`,
        SCRIPT LOAD of that script first in every node's pipeline. MOVED/ASK replies are followed
        (those commands did not run); every other reply, errors included, is returned in place."""
        results: list[Any] = [None] * len(items)
        todo: list[tuple[int, Any, bool]] = [(i, None, False) for i in range(len(items))]
        for _ in range(REDIRECT_LIMIT):
            shares: dict[str, tuple[Any, list[tuple[int, bool]]]] = {}
            for i, node, asking in todo:
                node = node or self._primary(items[i][0])
                shares.setdefault(node.name, (node, []))[1].append((i, asking))
            todo = []
            for node, share in shares.values():
                pipe = self._node_client(node).pipeline(transaction=False)
                if load is not None:
                    pipe.execute_command("SCRIPT", "LOAD", load.source)
                for i, asking in share:
                    if asking:
                        pipe.execute_command("ASKING")
                    pipe.execute_command(*items[i][1])
                replies = iter(self._execute(pipe))
                if load is not None:
                    sha = next(replies)
                    if isinstance(sha, Exception):
                        raise sha
                    if _s(sha).lower() != load.sha1:
                        raise EngineError(f"SCRIPT LOAD of {load.name} on {node.name} returned {_s(sha)}, bundle says {load.sha1}")
                for i, asking in share:
                    if asking:
                        next(replies)  # +OK of ASKING
                    r = next(replies)
                    if isinstance(r, AskError):  # MOVED too: an empty host is this node's (R8.13)
                        r = self._unnamed(r, node)
                    if isinstance(r, MovedError):
                        self._moved(r)
                        todo.append((i, self._node_at(r.host, r.port), False))
                    elif isinstance(r, AskError):
                        todo.append((i, self._node_at(r.host, r.port), True))
                    else:
                        if isinstance(r, (ReadOnlyError, ClusterDownError)):
                            # R8.11: the node was demoted (READONLY), or the cluster is re-forming:
                            # the slot map is stale. The next call reads it again, and the fence,
                            # on fresh connections; this one is not sent again (R4.17).
                            if node.redis_connection is not None:
                                node.redis_connection.connection_pool.disconnect()
                            self._stale = True
                        results[i] = r
            if not todo:
                return results
        raise EngineError(f"still redirected after {REDIRECT_LIMIT} rounds of MOVED/ASK")

    def _call(self, slot: int, *command: Any) -> Any:
        (reply,) = self._dispatch([(slot, command)])
        if isinstance(reply, Exception):
            raise reply
        return reply

    def _evalsha(self, name: str, keys: list[str], argv: list[Any]) -> Any:
        script = self.bundle.scripts[name]
        args = ("EVALSHA", script.sha1, len(keys), *keys, *argv)
        slot = key_slot(keys[0].encode())
        (reply,) = self._dispatch([(slot, args)])
        if isinstance(reply, Exception) and _is_noscript(reply):
            # NOSCRIPT from that node: SCRIPT LOAD there and the EVALSHA again, in one write.
            (reply,) = self._dispatch([(slot, args)], load=script)
        if isinstance(reply, Exception):
            raise reply
        return reply

    # ----------------------------------------------------------------------------- verbs

    @_engine
    def browse(self, q: str, offset: int, limit: int) -> list[dict]:
        if limit == 0:
            return []
        stop = min(offset + limit - 1, 2**63 - 1)
        slot = key_slot(key(q, "pending").encode())
        ids = [_s(i) for i in self._call(slot, "ZRANGE", key(q, "pending"), offset, stop)]
        if not ids:
            return []
        root = job_root(q)
        payloads = self._dispatch([(slot, ("HGET", root + i, "payload")) for i in ids])
        for p in payloads:
            if isinstance(p, Exception):
                raise p
        return [{"id": i, "payload": None if p is None else _s(p)} for i, p in zip(ids, payloads)]

    @_engine
    def pending_size(self, q: str) -> int:
        return int(self._call(key_slot(key(q, "pending").encode()), "ZCARD", key(q, "pending")))

    @_engine
    def pipeline_probe(self, probe_key: str, n: int) -> list[int]:
        slot = key_slot(probe_key.encode())
        replies = self._dispatch([(slot, ("INCR", probe_key))] * n)
        for r in replies:
            if isinstance(r, Exception):
                raise r
        return [int(r) for r in replies]

    @_engine
    def batch(self, q: str, n: int, depth: int, payload: str, queues: list[str] | None = None) -> int:
        """n enqueues (delay 0), enqueue i to queues[i % len] (R4.12). Each step takes the next
        `depth` enqueues and sends every node its share as one pipeline (R8.3). NOSCRIPT replies
        (they did not run) are re-sent, in order, behind one SCRIPT LOAD on the node that gave
        them; any other error ends the verb with kind engine (what landed is, per queue, a prefix
        of that queue's enqueues)."""
        script = self.bundle.scripts["enqueue"]
        names = queues or [q]
        items = [
            (
                key_slot(key(x, "pending").encode()),
                ("EVALSHA", script.sha1, 3, key(x, "pending"), key(x, "delayed"), key(x, "seq"), job_root(x), payload, 0),
            )
            for x in names
        ]
        done = 0
        while done < n:
            todo = [items[i % len(items)] for i in range(done, min(done + depth, n))]
            load = None
            stalled = 0
            while todo:
                missed = []
                for item, r in zip(todo, self._dispatch(todo, load=load)):
                    if isinstance(r, Exception):
                        if not _is_noscript(r):
                            raise r
                        missed.append(item)
                done += len(todo) - len(missed)
                stalled = stalled + 1 if (load is not None and len(missed) == len(todo)) else 0
                if stalled >= 10:
                    raise EngineError("NOSCRIPT No matching script. (enqueue still missing after 10 loads)")
                load = script if missed else None
                todo = missed
        return done


# ---------------------------------------------------------------------------------------------
# Behind Sentinel (SPEC §11): `connect` with "sentinel": {"name", "nodes"}. The url names the first
# Sentinel; its scheme, user, password and /db are the session's.

SENTINEL_TIMEOUT_S = 1.0  # each Sentinel: its TCP (and TLS) connect within 1 s, each reply within 1 s
DISCOVERY_BUDGET_S = 7.0  # every Sentinel asked in one discovery, within R5.8's 10 s for connect
PRIMARY_CHECK_TIMEOUT_S = 2.0  # the node a Sentinel named: connect, TLS, AUTH, ROLE, SELECT, all within 2 s


class _NotPrimary(RedisError):
    """The node a Sentinel named answers ROLE with something other than `master` (R11.2)."""


class _Replaced(RedisConnectionError):
    """redis-py's pool re-opening a lost connection by itself, to the address it remembers: a
    Sentinel session asks the Sentinels again instead (R11.3), so the call fails (nothing sent)."""


def _why(err: BaseException) -> str:
    if isinstance(err, (RedisTimeoutError, TimeoutError)):
        return f"no answer within {SENTINEL_TIMEOUT_S:g}s ({err})"
    return _server_message(err) if isinstance(err, RedisError) else f"{type(err).__name__}: {err}"


class SentinelSession(Session):
    """One session on the primary a Sentinel deployment names (SPEC §11).

    Discovery (R11.1, `_resolve`), at connect and again before the first call after a loss: each
    Sentinel of `nodes` in order, on its own connection (TLS as the session's, verified against
    the host `nodes` gives, R10.2-R10.4), authenticated as the url's user, asked
    `SENTINEL get-master-addr-by-name <name>` and closed. Nothing else goes to a Sentinel (R11.4):
    db 0 (no SELECT: a Sentinel has no databases), RESP2 (no HELLO), no CLIENT SETINFO, no PING.
    redis-py's own `redis.sentinel.Sentinel` is not used: it asks `SENTINEL MASTERS` and
    `SENTINEL SLAVES` (refused by the Sentinels' ACL: R11.4), and it talks plaintext to the
    Sentinels unless `sentinel_kwargs` repeat the TLS settings (R10.2). A Sentinel that refuses,
    stays silent past SENTINEL_TIMEOUT_S, answers an error or null is skipped.

    The node named gets a client of its own (`Session._new_client`: one connection, no retries);
    its connection sends AUTH, then `ROLE` (R11.2), and only if the reply begins with `master`
    SELECT <db> and the fence (R3.1): a node that is not the primary sees nothing but AUTH and
    ROLE, and the next Sentinel is asked.

    Losing the primary (R11.3): a connection error, a timeout or a READONLY reply fails the call
    with kind engine (never re-sent, R4.17), closes the client, and the next call resolves the
    primary afresh (never a remembered address) and reads the fence on the new connection before
    its script; `_evalsha` answers the new node's NOSCRIPT with SCRIPT LOAD there (R4.9). A
    connection that died while idle (the engine closed it: EOF on the socket) is found before the
    next call sends anything (`r`), and that call resolves the primary afresh too. redis-py's
    pool would re-open it by itself to the address it remembers: that is refused (`_Replaced`).
    """

    def __init__(self, bundle: Bundle, url: str, tls: TLS | None, name: str, sentinels: list[tuple[str, int]]):
        super().__init__(bundle, url, tls)
        self.name = name
        self.sentinels = list(sentinels)
        parts = urlsplit(url)
        self._username = unquote(parts.username) if parts.username else None
        self._password = unquote(parts.password) if parts.password is not None else None
        self._db = database(url)
        self._stale = False  # the primary was lost: the next call resolves it again
        self._closed = False
        self.primary: tuple[str, int] | None = None  # where the current client is (for messages)

    # ----------------------------------------------------------------------------- discovery

    def _sentinel_connection(self, host: str, port: int, timeout: float) -> Any:
        cls = self.tls.connection_class() if self.tls else redis.connection.Connection
        kwargs: dict[str, Any] = {}
        if self.tls is not None:
            kwargs = {k: v for k, v in self.tls.redis_kwargs().items() if k != "connection_class"}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # lib_name/lib_version deprecation in redis-py 8
            return cls(
                host=host,
                port=port,
                username=self._username,
                password=self._password,
                db=0,  # a Sentinel has no databases: no SELECT (R11.1)
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                retry=Retry(NoBackoff(), 0),
                retry_on_timeout=False,
                health_check_interval=0,
                protocol=2,
                lib_name=None,
                lib_version=None,  # no CLIENT SETINFO
                **kwargs,
            )

    def _ask(self, host: str, port: int, timeout: float) -> tuple[str, int] | None:
        """One Sentinel's answer: the primary's (host, port), or None when it does not know the
        name. Raises on a refused connection, a timeout or an error reply. The connection is
        closed whatever happens."""
        conn = self._sentinel_connection(host, port, timeout)
        try:
            conn.connect()  # TCP, TLS on rediss://, AUTH as the url's user: nothing else
            conn.send_command("SENTINEL", "get-master-addr-by-name", self.name)
            reply = conn.read_response()
        finally:
            conn.disconnect()
        if reply is None:
            return None
        if not isinstance(reply, (list, tuple)) or len(reply) != 2:
            raise ResponseError(f"unexpected reply to SENTINEL get-master-addr-by-name: {reply!r}")
        try:
            return _s(reply[0]), int(reply[1])
        except ValueError:
            raise ResponseError(f"unexpected port in SENTINEL get-master-addr-by-name's reply: {reply!r}") from None

    def _primary_url(self, host: str, port: int) -> str:
        """The url of the node a Sentinel named: the session's scheme and credentials, database 0
        (the SELECT is sent by `_on_primary_connection`, after ROLE)."""
        parts = urlsplit(self.url)
        userinfo, at, _ = parts.netloc.rpartition("@")
        shown = f"[{host}]" if ":" in host else host
        return urlunsplit((parts.scheme, f"{userinfo}{at}{shown}:{port}", "/0", "", ""))

    def _on_primary_connection(self, opened: list[bool], deadline: float, conn: Any) -> None:
        """redis_connect_func of a client on a node a Sentinel named: AUTH, ROLE (R11.2), then
        SELECT and the fence (R3.1). Only the client's first connection is let through: a second
        one is redis-py's pool re-opening a lost connection to the remembered address (R11.3).
        Every step up to SELECT ends by `deadline` (a socket timeout is per read, so each step
        gets what is left); the fence and the session's commands then have socket_timeout."""
        if opened[0]:
            raise _Replaced(f"the connection to {conn.host}:{conn.port} was lost; the next call asks the Sentinels again")
        opened[0] = True
        sock = conn._sock

        def bounded() -> None:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))

        bounded()
        conn.on_connect()  # AUTH as the url's user (db 0 on this connection: no SELECT yet)
        bounded()
        conn.send_command("ROLE")
        reply = conn.read_response()
        role = _s(reply[0]) if isinstance(reply, (list, tuple)) and reply else repr(reply)
        if role != "master":
            raise _NotPrimary(f"{conn.host}:{conn.port} answers ROLE {role}, not master")
        if self._db:
            bounded()
            conn.send_command("SELECT", self._db)
            if _s(conn.read_response()) != "OK":
                raise ResponseError(f"SELECT {self._db} failed")
        sock.settimeout(conn.socket_timeout)
        self._read_fence(conn)

    def _connect_primary(self, host: str, port: int, budget: float) -> redis.Redis:
        """The session's client on a node a Sentinel named, checked within `budget` seconds: the
        TCP connect and the TLS handshake get half each (each is bounded by the connect timeout),
        AUTH, ROLE and SELECT what is left of it."""
        opened = [False]
        client = self._new_client(
            self._primary_url(host, port),
            functools.partial(self._on_primary_connection, opened, time.monotonic() + budget),
            connect_timeout=budget / 2,
        )
        _first_connection(client)  # closes the client on any failure
        return client

    def _resolve(self) -> None:
        """R11.1 and R11.2: ask the Sentinels in order until one names a node that answers ROLE
        master; open the session's connection there (fence included). Else kind engine, saying
        why. A fence refusal, or an error reply of the primary itself (a SELECT it refuses), ends
        it at once."""
        deadline = time.monotonic() + DISCOVERY_BUDGET_S
        notes: list[str] = []
        silent = unknown = 0
        for host, port in self.sentinels:
            left = deadline - time.monotonic()
            if left <= 0.05:
                notes.append(f"{host}:{port} not asked: {DISCOVERY_BUDGET_S:g}s spent")
                silent += 1
                continue
            try:
                named = self._ask(host, port, min(SENTINEL_TIMEOUT_S, left))
            except (RedisError, OSError) as e:
                notes.append(f"{host}:{port}: {_why(e)}")
                silent += 1
                continue
            if named is None:
                notes.append(f"{host}:{port} does not know {self.name!r}")
                unknown += 1
                continue
            left = deadline - time.monotonic()
            if left <= 0.05:
                notes.append(f"{host}:{port} named {named[0]}:{named[1]}, not checked: {DISCOVERY_BUDGET_S:g}s spent")
                continue
            try:
                client = self._connect_primary(*named, min(PRIMARY_CHECK_TIMEOUT_S, left))
            except _NotPrimary as e:
                notes.append(f"{host}:{port} named {named[0]}:{named[1]}, which {str(e).split(' ', 1)[1]}")
                continue
            except (RedisConnectionError, RedisTimeoutError, OSError) as e:
                notes.append(f"{host}:{port} named {named[0]}:{named[1]}: {_server_message(e)}")
                continue
            self._client, self.primary = client, named
            return
        if silent == len(self.sentinels):
            why = "no Sentinel answered"
        elif unknown == len(self.sentinels):
            why = f"no Sentinel knows the name {self.name!r}"
        else:
            why = f"no Sentinel named a primary for {self.name!r}"
        raise EngineError(f"sentinel: {why} ({'; '.join(notes)})")

    # ----------------------------------------------------------------------------- session

    @_engine
    def open(self) -> None:
        self._resolve()

    def close(self) -> None:
        self._closed = True
        self._drop()

    def _drop(self) -> None:
        client, self._client, self.primary = self._client, None, None
        _close_client(client)

    def _on_failure(self, err: BaseException) -> None:
        """R11.3: a lost connection, a timeout or READONLY makes the primary stale: its connection
        is closed now, and the next call resolves the primary again."""
        lost = isinstance(err, (RedisConnectionError, RedisTimeoutError, OSError, ReadOnlyError))
        if lost or str(err).startswith("READONLY") or _server_message(err).startswith("READONLY"):
            self._stale = True
            self._drop()

    @staticmethod
    def _alive(client: redis.Redis) -> bool:
        """The client's idle connection is still open and holds no data nobody asked for (a
        closed socket reads EOF: the engine, or a failover, closed it)."""
        for conn in list(getattr(client.connection_pool, "_available_connections", [])):
            if getattr(conn, "_sock", None) is None:
                return False
            try:
                if conn.can_read():
                    return False
            except (RedisError, OSError):
                return False
        return True

    @property
    def r(self) -> redis.Redis:
        if self._closed:
            raise EngineError("session is closed")
        if self._client is not None and not self._stale and not self._alive(self._client):
            self._stale = True
            self._drop()
        if self._stale or self._client is None:
            self._drop()
            self._resolve()  # raises while no primary is found: this call fails, the next one tries again
            self._stale = False
        return self._client
