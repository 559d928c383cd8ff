"""THE sole raw-Redis seam of the Python connector.

This module, and only this module, imports redis-py, owns the raw client of every session and
knows the key schema (SPEC §1). Everything else talks to `Session` methods and sees only the
exceptions of `errors` (a test in tests/test_seam.py fails if `redis` is imported elsewhere).

Commands sent, and nothing else (besides what redis-py sends at connect: AUTH, SELECT):
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
import inspect
import os
import sys
import warnings
from typing import Any, Callable

import redis
from redis.backoff import NoBackoff, default_backoff
from redis.exceptions import NoScriptError, RedisError, ResponseError
from redis.retry import Retry

from .bundle import Bundle, Script
from .errors import EngineError, FenceError, Invalid

# ---------------------------------------------------------------------------------------------
# The key schema (SPEC §1): emq:{q}:<type>; the hash tag {q} keeps a queue in one slot.


def key(q: str, kind: str) -> str:
    return f"emq:{{{q}}}:{kind}"


def job_root(q: str) -> str:
    """ARGV[1] of every script: the job hash root, same hash tag as the KEYS."""
    return f"emq:{{{q}}}:job:"


SOCKET_TIMEOUT_S = 60.0

# BROKEN ON PURPOSE when true (`--retry-on-error` or EMQ_PY_RETRY_ON_ERROR=1), for the gate's
# self-test: redis-py's default retry policy is kept, so after a dropped connection it reconnects
# and re-sends the command; a script call whose reply was lost then runs twice, and G8 fails it.
RETRY_ON_ERROR = os.environ.get("EMQ_PY_RETRY_ON_ERROR") == "1"
CONNECT_TIMEOUT_S = 10.0


def _client_default_retry() -> Retry:
    """The retry policy `redis.Redis(...)` gets by default (from_url alone gets none): re-send a
    command after a ConnectionError or TimeoutError, up to 10 times, with a jittered backoff."""
    default = inspect.signature(redis.Redis.__init__).parameters["retry"].default
    if isinstance(default, Retry):
        return copy.deepcopy(default)
    return Retry(default_backoff(), 3)  # redis-py 5: Redis() had no retry default; its usual one


class _FenceRejected(RedisError):
    """Raised inside redis-py's connect path so redis-py drops the socket; mapped to FenceError."""


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
        prefix = _PREFIX_OF.get(type(err).__name__)
        first = msg.split(" ", 1)[0]
        if prefix and not msg.startswith(prefix):
            return f"{prefix} {msg}"
        if type(err) is ResponseError and not (first.isupper() and first.isalpha()):
            return f"ERR {msg}"
    return msg or type(err).__name__


def _engine(fn: Callable) -> Callable:
    """Translate redis-py / socket failures into the wire error kinds."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except _FenceRejected as e:
            raise FenceError(str(e)) from None
        except RedisError as e:
            raise EngineError(_server_message(e)) from None
        except OSError as e:
            raise EngineError(f"connection error: {e}") from None

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def _s(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


class Session:
    """One engine connection (one redis-py client whose pool holds at most one connection)."""

    def __init__(self, bundle: Bundle, url: str):
        self.bundle = bundle
        self.url = url
        self._client: redis.Redis | None = None

    # ----------------------------------------------------------------------------- connect

    def _fence(self, conn: Any) -> None:
        """redis_connect_func: runs on EVERY new socket, before any command of ours."""
        conn.on_connect()  # AUTH / SELECT as redis-py does them (CLIENT SETINFO disabled)
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
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # lib_name/lib_version deprecation in redis-py 8
                client = redis.Redis.from_url(
                    self.url,
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
                    socket_connect_timeout=CONNECT_TIMEOUT_S,
                    redis_connect_func=self._fence,
                )
        except (ValueError, TypeError) as e:
            raise Invalid(f"url: {e}") from None
        pool = client.connection_pool
        try:
            try:
                conn = pool.get_connection()
            except TypeError:  # redis-py 5 wants a command name
                conn = pool.get_connection("_")
            pool.release(conn)
        except BaseException:
            client.close()
            raise
        self._client = client

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
        (reply,) = self._send_chunk(args, 1, load_first=script)
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
    def batch(self, q: str, n: int, depth: int, payload: str) -> int:
        """n enqueues of payload (delay 0), `depth` EVALSHA per pipeline write."""
        script = self.bundle.scripts["enqueue"]
        keys = (key(q, "pending"), key(q, "delayed"), key(q, "seq"))
        command = ("EVALSHA", script.sha1, 3, *keys, job_root(q), payload, 0)
        # The first enqueue goes through the normal path: it loads the script if it is missing.
        self._evalsha("enqueue", list(keys), [job_root(q), payload, 0])
        done = 1
        while done < n:
            todo = min(depth, n - done)
            load = False
            stalled = 0
            while todo:
                misses = 0
                for r in self._send_chunk(command, todo, load_first=script if load else None):
                    if isinstance(r, Exception):
                        if not _is_noscript(r):
                            raise r
                        misses += 1
                done += todo - misses
                # A miss means the script vanished mid-batch (SCRIPT FLUSH): resend only the misses
                # (the others ran; resending them would enqueue twice) behind one SCRIPT LOAD in the
                # same write, so no other client's flush can fall between the load and the resend.
                # Give up only when a freshly loaded script misses on every command, again and again.
                stalled = stalled + 1 if (load and misses == todo) else 0
                if stalled >= 10:
                    raise EngineError("NOSCRIPT No matching script. (enqueue still missing after 10 loads)")
                load = misses > 0
                todo = misses
        return done

    def _send_chunk(self, command: tuple, count: int, load_first: Script | None = None) -> list:
        pipe = self.r.pipeline(transaction=False)
        if load_first is not None:
            pipe.execute_command("SCRIPT", "LOAD", load_first.source)
        for _ in range(count):
            pipe.execute_command(*command)
        replies = pipe.execute(raise_on_error=False)
        if load_first is not None:
            sha = replies.pop(0)
            if isinstance(sha, Exception):
                raise sha
            if _s(sha).lower() != load_first.sha1:
                raise EngineError(f"SCRIPT LOAD of {load_first.name} returned {_s(sha)}, bundle says {load_first.sha1}")
        return replies
