"""Argument validation for the wire commands (SPEC §1, §5). No redis here.

Everything is checked before a byte is sent; a failure raises errors.Invalid.
A JSON bool is not an integer; a float (even 1.0) is not an integer.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from .errors import Invalid

QUEUE_RE = re.compile(r"[A-Za-z0-9._-]{1,128}")
ID_RE = re.compile(r"j[0-9]{16}")
# Bounds of bundle/SPEC.md §4 (the same as the Rust reference connector's).
MAX_MS = 1_000_000_000_000  # keeps now + ms an exact integer in Lua's %.14g
MAX_COUNT = 2**31 - 1  # attempts, max_attempts, limit, offset
MAX_PROBE = 1_000_000
MAX_BATCH = 10_000_000
MAX_DEPTH = 100_000
MAX_BATCH_QUEUES = 64  # R4.12: batch.queues holds 1 to 64 queue names


def _field(req: dict, name: str) -> Any:
    if name not in req:
        raise Invalid(f"missing field {name}")
    return req[name]


def integer(req: dict, name: str, minimum: int, maximum: int = MAX_COUNT) -> int:
    value = _field(req, name)
    if type(value) is not int:  # excludes bool (a subclass of int) and floats
        raise Invalid(f"{name} must be an integer >= {minimum}")
    if value < minimum:
        raise Invalid(f"{name} must be >= {minimum}")
    if value > maximum:
        raise Invalid(f"{name} must be <= {maximum}")
    return value


def _queue_name(value: Any, what: str = "queue") -> str:
    if not isinstance(value, str) or QUEUE_RE.fullmatch(value) is None:
        raise Invalid(f"{what} must be 1-128 chars of [A-Za-z0-9._-]")
    return value


def queue(req: dict) -> str:
    return _queue_name(_field(req, "queue"))


def batch_queues(req: dict, first: str) -> list[str] | None:
    """R4.12: the optional `queues` of `batch`: None when absent, else 1 to 64 queue names (each
    checked as R1.1 says), the first of which is `queue` (`first`, already validated)."""
    if "queues" not in req:
        return None
    value = req["queues"]
    if not isinstance(value, list):
        raise Invalid("queues must be a list of queue names")
    if not 1 <= len(value) <= MAX_BATCH_QUEUES:
        raise Invalid(f"queues must hold 1 to {MAX_BATCH_QUEUES} queue names, not {len(value)}")
    names = [_queue_name(v, f"queues[{i}]") for i, v in enumerate(value)]
    if names[0] != first:
        raise Invalid("queue must be queues[0] when queues is given")
    return names


def cluster_flag(req: dict) -> bool:
    """R8.1: the optional `cluster` of `connect`; a JSON boolean when present (absent = false)."""
    if "cluster" not in req:
        return False
    value = req["cluster"]
    if type(value) is not bool:
        raise Invalid("cluster must be a boolean")
    return value


MAX_SENTINELS = 64  # R11.1: far more than a deployment has; each one gets a bounded share of connect


def _sentinel_node(value: Any, i: int) -> tuple[str, int]:
    """One `host:port` of `sentinel.nodes` (R11.1): a host (an IPv6 literal in brackets) and a
    decimal port 1..65535."""
    what = f"sentinel.nodes[{i}]"
    if not isinstance(value, str) or value == "":
        raise Invalid(f"{what} must be a host:port string")
    if any(c.isspace() or c in "/@?#\0" for c in value):
        raise Invalid(f"{what} must be host:port, not {value!r}")
    host, sep, port = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        if ":" not in host:
            raise Invalid(f"{what}: only an IPv6 literal goes in brackets, not {value!r}")
    elif ":" in host:
        raise Invalid(f"{what}: an IPv6 host goes in brackets ([::1]:26379), not {value!r}")
    if not sep or host == "":
        raise Invalid(f"{what} must be host:port, not {value!r}")
    if not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
        raise Invalid(f"{what} must name a port 1..65535, not {port!r}")
    return host, int(port)


def sentinel(req: dict, cluster: bool) -> tuple[str, list[tuple[str, int]]] | None:
    """R11.1: the optional `sentinel` of `connect`, `{"name": ..., "nodes": ["host:port", ...]}`:
    the name the Sentinels monitor the primary by and the Sentinels to ask, in order. Absent or
    null = None (not a Sentinel deployment). A name that is not a non-empty string, `nodes` that is
    not a non-empty list of host:port with a port 1..65535, or `sentinel` with `"cluster": true`
    is invalid, before anything is sent."""
    value = req.get("sentinel")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise Invalid('sentinel must be an object {"name": ..., "nodes": ["host:port", ...]} or null')
    if cluster:
        raise Invalid('sentinel and "cluster": true do not go together (SPEC R11.1, R8.1)')
    name = value.get("name")
    if not isinstance(name, str) or name == "":
        raise Invalid("sentinel.name must be a non-empty string")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise Invalid("sentinel.name must be valid UTF-8 (no lone surrogates)") from None
    nodes = value.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise Invalid("sentinel.nodes must be a non-empty list of host:port")
    if len(nodes) > MAX_SENTINELS:
        raise Invalid(f"sentinel.nodes must hold at most {MAX_SENTINELS} Sentinels, not {len(nodes)}")
    return name, [_sentinel_node(n, i) for i, n in enumerate(nodes)]


def text(req: dict, name: str, allow_empty: bool = True) -> str:
    value = _field(req, name)
    if not isinstance(value, str):
        raise Invalid(f"{name} must be a string")
    if not allow_empty and value == "":
        raise Invalid(f"{name} must not be empty")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise Invalid(f"{name} must be valid UTF-8 (no lone surrogates)") from None
    return value


def payload(req: dict) -> str:
    return text(req, "payload")


def job_id(req: dict) -> str:
    value = _field(req, "id")
    if not isinstance(value, str) or ID_RE.fullmatch(value) is None:
        raise Invalid("id must match ^j[0-9]{16}$")
    return value


def session_name(req: dict) -> str:
    value = _field(req, "session")
    if not isinstance(value, str) or value == "":
        raise Invalid("session must be a non-empty string")
    return value


def url(req: dict) -> str:
    value = text(req, "url", allow_empty=False)
    # SPEC §5: one url rule for every connector: redis://, or rediss:// over TLS (§10, R10.1);
    # unix:// and every other scheme are refused.
    if not value.startswith(("redis://", "rediss://")):
        raise Invalid("url must be redis://[:password@]host:port[/db] or rediss://[:password@]host:port[/db]")
    # SPEC §5: a port and a /db are decimal integers (redis-py would ignore a bad /db and connect).
    try:
        parts = urlsplit(value)
        parts.port  # raises ValueError on a non-numeric or out-of-range port
    except ValueError:
        raise Invalid("url must be redis[s]://[:password@]host:port[/db]: bad port") from None
    db = parts.path.lstrip("/")
    if db and not (db.isascii() and db.isdigit()):
        raise Invalid(f"url database must be a decimal integer, not {db!r}")
    return value


def is_tls(url_value: str) -> bool:
    """SPEC §10: a rediss:// url (already validated by `url`) is a session over TLS."""
    return url_value.startswith("rediss://")


def ca_file(req: dict, url_value: str) -> str | None:
    """R10.1: the optional `ca_file` of `connect`, a path (a non-empty string) that goes with a
    rediss:// url only; absent = None (a rediss:// session then trusts the system's store). Whether
    the file can be read and holds a certificate is checked by the seam (seam.TLS), which builds
    the session's TLS context from it, still before anything is dialled."""
    if "ca_file" not in req:
        return None
    value = text(req, "ca_file", allow_empty=False)
    if "\0" in value:
        raise Invalid("ca_file must not contain a NUL byte")
    if not is_tls(url_value):
        raise Invalid("ca_file goes with a rediss:// url only (SPEC R10.1)")
    return value


def database(url_value: str) -> int:
    """R9.1: the database a url (validated by `url`) names: none, or `/` alone, is 0. On a cluster
    too (R8.5): the client never refuses a database itself, since only the engine knows how many it
    has (`cluster-databases`); a SELECT it refuses fails `connect` with kind engine (the seam)."""
    db = urlsplit(url_value).path.lstrip("/")
    return int(db) if db else 0


def probe_key(req: dict) -> str:
    value = text(req, "key", allow_empty=False)
    if value.startswith("emq:"):
        raise Invalid("probe key must be outside emq:")
    return value
